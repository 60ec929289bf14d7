// Splits normalized text into the pieces ("words") that BPE encodes one at a time
// (tokenizer.json "pre_tokenizer": Split steps, optionally followed by ByteLevel).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/function_ref.h"
#include "tokenizer/regex.h"

namespace nanovllm {

// What happens to the text a Split pattern matches (Hugging Face SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  using Sink = FunctionRef<void(std::string_view)>;

  // Adds a Split step with a regex pattern written for Oniguruma.
  void add_regex_split(std::string_view onig_pattern, SplitBehavior behavior, bool invert);
  // Adds a Split step that matches a literal string.
  void add_literal_split(std::string literal, SplitBehavior behavior, bool invert);
  // Ends the sequence with ByteLevel: the pieces are byte strings the model spells with the
  // byte alphabet. use_regex splits each piece with GPT-2's pattern first.
  void set_byte_level(bool add_prefix_space, bool use_regex);

  bool byte_level() const { return byte_level_; }

  // Calls sink for every non-empty piece of text, in order. The views are valid only during
  // the call.
  void split(std::string_view text, Sink sink) const;

 private:
  struct Step {
    std::optional<Regex> regex;  // null for a literal split
    std::string literal;
    SplitBehavior behavior;
    bool invert;
  };

  void apply(std::size_t step, std::string_view text, Sink sink) const;
  void apply_byte_level(std::string_view text, Sink sink) const;
  void split_step(const Step& step, std::string_view text, Sink sink) const;

  std::vector<Step> steps_;
  bool byte_level_ = false;
  bool add_prefix_space_ = false;
  std::optional<Step> byte_level_regex_;  // GPT-2's split inside ByteLevel
};

}  // namespace nanovllm
