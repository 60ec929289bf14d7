// A bounded cache from a pre-tokenized word to its token ids: text repeats words constantly,
// so most words skip BPE merging. One cache serves one thread (no locking on the hot path);
// BpeModel hands each thread its own. Open addressing over flat arrays, so lookups do not
// chase pointers; once full it stops taking new words.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

class WordCache {
 public:
  // Words longer than this are not cached (they are rare and would hog memory).
  static constexpr std::size_t kMaxWordBytes = 64;

  explicit WordCache(std::size_t max_words = 1 << 16);

  // Appends the cached ids of word to out and returns true, or returns false.
  bool lookup(std::string_view word, uint64_t hash, std::vector<int>& out) const {
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key_length == kEmpty) return false;
      if (s.hash == hash && s.key_length == word.size() &&
          std::memcmp(keys_.data() + s.key_offset, word.data(), word.size()) == 0) {
        out.insert(out.end(), ids_.begin() + s.ids_offset,
                   ids_.begin() + s.ids_offset + s.id_count);
        return true;
      }
    }
  }

  void insert(std::string_view word, uint64_t hash, const int* ids, std::size_t count);

  static uint64_t hash(std::string_view word);

 private:
  static constexpr uint16_t kEmpty = 0xFFFF;
  struct Slot {
    uint64_t hash;
    uint32_t key_offset;
    uint32_t ids_offset;
    uint16_t key_length = kEmpty;
    uint16_t id_count;
  };

  std::size_t max_words_;
  std::size_t words_ = 0;
  std::size_t mask_;
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int> ids_;
};

}  // namespace nanovllm
