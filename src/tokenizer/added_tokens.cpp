#include "tokenizer/added_tokens.h"

#include <cstring>

#include "tokenizer/normalizer.h"
#include "tokenizer/unicode_class.h"
#include "tokenizer/utf8.h"

namespace nanovllm {

namespace {

// The last character of text, or nothing.
bool ends_with_word_char(std::string_view text) {
  if (text.empty()) return false;
  std::size_t i = text.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  int len = 0;
  return is_word_char(utf8::decode(text.substr(i), &len));
}

bool starts_with_word_char(std::string_view text) {
  if (text.empty()) return false;
  int len = 0;
  return is_word_char(utf8::decode(text, &len));
}

// Offset where the whitespace at the end of text starts.
std::size_t trailing_space_start(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t i = end - 1;
    while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
    int len = 0;
    if (!is_white_space(utf8::decode(text.substr(i), &len))) break;
    end = i;
  }
  return end;
}

// Length of the whitespace at the start of text.
std::size_t leading_space_length(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    int len = 0;
    if (!is_white_space(utf8::decode(text.substr(i), &len))) break;
    i += len;
  }
  return i;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized_pass,
                                     const Normalizer& normalizer) {
  trie_.emplace_back();
  for (const AddedToken& token : tokens) {
    if (token.normalized != normalized_pass || token.content.empty()) continue;
    std::string text = normalized_pass ? normalizer.normalize(token.content) : token.content;
    if (text.empty()) continue;
    // Walk or extend the trie; the first token with a given spelling keeps it.
    int32_t node = 0;
    for (const char c : text) {
      const auto byte = static_cast<unsigned char>(c);
      int32_t child = -1;
      for (const auto& [b, index] : trie_[node].children) {
        if (b == byte) child = index;
      }
      if (child < 0) {
        child = static_cast<int32_t>(trie_.size());
        trie_[node].children.emplace_back(byte, child);
        trie_.emplace_back();
      }
      node = child;
    }
    if (trie_[node].pattern >= 0) continue;
    trie_[node].pattern = static_cast<int32_t>(patterns_.size());
    first_byte_[static_cast<unsigned char>(text[0])] = true;
    patterns_.push_back({std::move(text), token});
  }
  for (int b = 0; b < 256; ++b) {
    if (!first_byte_[b]) continue;
    only_first_byte_ = only_first_byte_ == -1 ? b : -2;
  }
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, std::size_t at,
                                      std::size_t* length) const {
  int32_t best = -1;
  int32_t node = 0;
  for (std::size_t i = at; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int32_t child = -1;
    for (const auto& [b, index] : trie_[node].children) {
      if (b == byte) {
        child = index;
        break;
      }
    }
    if (child < 0) break;
    node = child;
    if (trie_[node].pattern >= 0) {
      best = trie_[node].pattern;
      *length = i + 1 - at;
    }
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& out) const {
  std::size_t done = 0;  // text before this offset is already in segments
  std::size_t at = 0;
  while (at < text.size()) {
    if (only_first_byte_ >= 0) {
      // Typical special tokens all start with '<': jump to the next one.
      const void* next = std::memchr(text.data() + at, only_first_byte_, text.size() - at);
      if (next == nullptr) break;
      at = static_cast<const char*>(next) - text.data();
    } else if (!first_byte_[static_cast<unsigned char>(text[at])]) {
      ++at;
      continue;
    }
    std::size_t length = 0;
    const int32_t found = longest_at(text, at, &length);
    if (found < 0) {
      ++at;
      continue;
    }
    const AddedToken& token = patterns_[found].token;
    std::size_t start = at, stop = at + length;
    at = stop;  // the next match starts after this one, even if this one is rejected
    if (token.single_word) {
      const bool space_before = start == 0 || !ends_with_word_char(text.substr(0, start));
      const bool space_after = stop == text.size() || !starts_with_word_char(text.substr(stop));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) {
      // Whitespace that an earlier match already swallowed stays with it.
      start = std::max(trailing_space_start(text.substr(0, start)), done);
    }
    if (token.rstrip) stop += leading_space_length(text.substr(stop));
    if (done < start) out.push_back({done, start, -1});
    out.push_back({start, stop, token.id});
    done = stop;
  }
  if (done < text.size()) out.push_back({done, text.size(), -1});
}

}  // namespace nanovllm
