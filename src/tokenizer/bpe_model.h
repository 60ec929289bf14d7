// Byte-pair encoding (tokenizer.json "model" of type BPE): the vocabulary, the merges ranked
// by priority, and the encoding of one pre-tokenized word.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/merge_table.h"
#include "tokenizer/word_cache.h"

namespace nanovllm {

struct BpeOptions {
  std::optional<std::string> unk_token;  // replaces symbols missing from the vocabulary
  bool fuse_unk = false;                 // consecutive unknown symbols become one unk
  bool ignore_merges = false;            // a word found whole in the vocabulary is one token
  // Words arrive as raw bytes and each byte is one symbol, spelled with the byte-level
  // alphabet (set when the pre-tokenizer ends with ByteLevel).
  bool byte_level = false;
};

class BpeModel {
 public:
  // vocab: (token, id) pairs; merges: pairs of tokens in priority order. Throws Error naming
  // the problem (duplicate ids, merges of unknown tokens, a missing unk token).
  BpeModel(std::vector<std::pair<std::string, int>> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);

  // Appends the ids of one pre-tokenized word to out. `cache` must be this thread's
  // (thread_cache()); fetch it once per text, not per word.
  void encode_word(std::string_view word, WordCache& cache, std::vector<int>& out) const;
  void encode_word(std::string_view word, std::vector<int>& out) const {
    encode_word(word, thread_cache(), out);
  }

  // The calling thread's word cache for this model (threads never share one, so the hot
  // path takes no lock).
  WordCache& thread_cache() const;

  std::optional<int> token_to_id(std::string_view token) const;
  // The token for an id, or nullptr if the vocabulary has no such id.
  const std::string* id_to_token(int id) const;
  // One past the largest id in the vocabulary.
  int id_limit() const { return static_cast<int>(tokens_.size()); }

  // Applies merges to a symbol sequence in place: always the lowest-ranked pair, leftmost
  // first (exposed for tests).
  void merge(std::vector<int>& symbols) const;

 private:
  struct TransparentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using TokenMap = std::unordered_map<std::string, int, TransparentHash, std::equal_to<>>;

  // Splits a word into initial symbols, handling unknown ones as Hugging Face does.
  void initial_symbols(std::string_view word, std::vector<int>& symbols) const;
  void merge_small(std::vector<int>& symbols) const;
  void merge_large(std::vector<int>& symbols) const;

  TokenMap vocab_;
  std::vector<std::optional<std::string>> tokens_;  // by id
  MergeTable merges_;
  BpeOptions options_;
  std::optional<int> unk_id_;
  std::array<int, 256> byte_symbol_{};  // byte-level: id of each byte's symbol, -1 if none
  TokenMap whole_words_;                // byte-level ignore_merges: raw bytes -> id
  mutable std::mutex caches_mutex_;
  mutable std::unordered_map<std::thread::id, std::unique_ptr<WordCache>> caches_;
};

}  // namespace nanovllm
