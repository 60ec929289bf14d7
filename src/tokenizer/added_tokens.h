// Added and special tokens (tokenizer.json "added_tokens"): strings matched in the text before
// pre-tokenization and turned straight into their ids, with Hugging Face's per-token options.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

class Normalizer;

struct AddedToken {
  int id = -1;
  std::string content;
  bool single_word = false;  // only match where no word character touches either end
  bool lstrip = false;       // also swallow the whitespace before the match
  bool rstrip = false;       // also swallow the whitespace after the match
  bool normalized = true;    // match in the normalized text rather than the raw text
  bool special = false;      // skipped by decode(skip_special_tokens = true)
};

// A piece of text: either an added token (id >= 0) or plain text to tokenize (id == -1).
struct TextSegment {
  std::size_t begin, end;
  int id;
};

class AddedTokenMatcher {
 public:
  // tokens: the added tokens that take part in one of the two matching passes (raw text or
  // normalized text); `normalizer` spells the patterns of the normalized pass.
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized_pass,
                    const Normalizer& normalizer);

  bool empty() const { return patterns_.empty(); }

  // Splits text into segments covering it in order (Hugging Face's AddedVocabulary
  // find_matches: leftmost-longest, non-overlapping; a match rejected by single_word is
  // skipped, not retried at a later offset).
  void split(std::string_view text, std::vector<TextSegment>& out) const;

 private:
  struct Pattern {
    std::string text;  // what is matched (normalized content in the normalized pass)
    AddedToken token;
  };
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t pattern = -1;
  };

  // Longest pattern that starts at text[at], or -1.
  int32_t longest_at(std::string_view text, std::size_t at, std::size_t* length) const;

  std::vector<Pattern> patterns_;
  std::vector<Node> trie_;  // trie_[0] is the root
  std::array<bool, 256> first_byte_{};
  int only_first_byte_ = -1;  // the first byte of every pattern, if they all share one
};

}  // namespace nanovllm
