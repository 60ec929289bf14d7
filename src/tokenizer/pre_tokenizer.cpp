#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "tokenizer/onig_translate.h"
#include "tokenizer/utf8.h"

namespace nanovllm {

namespace {

// GPT-2's pattern, which ByteLevel applies when use_regex is set.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Span {
  std::size_t begin, end;
  bool flag;  // is a match (before the behavior), or is removed (after)
};

// Reports matches and the gaps between them, in order, the way Oniguruma's find_iter does:
// an empty match right where the previous match ended is skipped by advancing one character.
template <typename Find, typename OnSpan>
void for_each_span(std::string_view text, Find&& find, OnSpan&& on_span) {
  std::size_t search_from = 0, previous = 0;
  std::optional<std::size_t> last_match_end;
  while (search_from <= text.size()) {
    std::size_t begin = 0, end = 0;
    if (!find(search_from, &begin, &end)) break;
    if (begin == end && last_match_end == end) {
      if (search_from >= text.size()) break;
      search_from += utf8::sequence_length(static_cast<unsigned char>(text[search_from]));
      continue;
    }
    search_from = end;
    last_match_end = end;
    if (previous != begin) on_span(Span{previous, begin, false});
    on_span(Span{begin, end, true});
    previous = end;
  }
  if (previous != text.size()) on_span(Span{previous, text.size(), false});
}

// Turns (span, is_match) into (span, removed) according to the behavior, merging spans as
// Hugging Face's NormalizedString::split does.
void apply_behavior(SplitBehavior behavior, std::vector<Span>& spans) {
  std::vector<Span> out;
  out.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (Span& s : spans) s.flag = false;
      return;
    case SplitBehavior::kRemoved:
      return;
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.flag == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back({s.begin, s.end, false});
        }
        previous_match = s.flag;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.flag && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back({s.begin, s.end, false});
        }
        previous_match = s.flag;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->flag && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back({it->begin, it->end, false});
        }
        previous_match = it->flag;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  spans = std::move(out);
}

}  // namespace

void PreTokenizer::add_regex_split(std::string_view onig_pattern, SplitBehavior behavior,
                                   bool invert) {
  NVLLM_CHECK_MSG(!byte_level_, "ByteLevel must be the last pre-tokenizer step");
  steps_.push_back({Regex(translate_onig_pattern(onig_pattern)), "", behavior, invert});
}

void PreTokenizer::add_literal_split(std::string literal, SplitBehavior behavior, bool invert) {
  NVLLM_CHECK_MSG(!byte_level_, "ByteLevel must be the last pre-tokenizer step");
  steps_.push_back({std::nullopt, std::move(literal), behavior, invert});
}

void PreTokenizer::set_byte_level(bool add_prefix_space, bool use_regex) {
  NVLLM_CHECK_MSG(!byte_level_, "ByteLevel given twice");
  byte_level_ = true;
  add_prefix_space_ = add_prefix_space;
  if (use_regex) {
    byte_level_regex_ =
        Step{Regex(translate_onig_pattern(kGpt2Pattern)), "", SplitBehavior::kIsolated, false};
  }
}

void PreTokenizer::split(std::string_view text, Sink sink) const {
  if (text.empty()) return;
  apply(0, text, sink);
}

void PreTokenizer::apply(std::size_t index, std::string_view text, Sink sink) const {
  if (index == steps_.size()) {
    apply_byte_level(text, sink);
    return;
  }
  split_step(steps_[index], text, [&](std::string_view piece) { apply(index + 1, piece, sink); });
}

void PreTokenizer::apply_byte_level(std::string_view text, Sink sink) const {
  // The prefix space goes on every piece that reaches ByteLevel, as Hugging Face does.
  std::string prefixed;
  if (add_prefix_space_ && !text.starts_with(' ')) {
    prefixed.reserve(text.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(text);
    text = prefixed;
  }
  if (byte_level_regex_) {
    split_step(*byte_level_regex_, text, sink);
  } else {
    sink(text);
  }
}

void PreTokenizer::split_step(const Step& step, std::string_view text, Sink sink) const {
  const auto find = [&](std::size_t from, std::size_t* begin, std::size_t* end) {
    if (step.regex) return step.regex->search(text, from, begin, end);
    if (step.literal.empty()) return false;  // an empty literal never splits
    const std::size_t at = text.find(step.literal, from);
    if (at == std::string_view::npos) return false;
    *begin = at;
    *end = at + step.literal.size();
    return true;
  };
  // The common case (isolated matches) streams pieces without building a list.
  if (step.behavior == SplitBehavior::kIsolated) {
    for_each_span(text, find, [&](const Span& s) {
      if (s.end > s.begin) sink(text.substr(s.begin, s.end - s.begin));
    });
    return;
  }
  std::vector<Span> spans;
  for_each_span(text, find, [&](const Span& s) { spans.push_back(s); });
  for (Span& s : spans) s.flag = s.flag != step.invert;
  apply_behavior(step.behavior, spans);
  for (const Span& s : spans) {
    if (!s.flag && s.end > s.begin) sink(text.substr(s.begin, s.end - s.begin));
  }
}

}  // namespace nanovllm
