// Open-addressing hash map from a pair of token ids to its merge (rank and merged id): the
// lookup in BPE's inner loop.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace nanovllm {

struct Merge {
  int32_t rank;    // lower merges first
  int32_t merged;  // id of the token the pair becomes
};

class MergeTable {
 public:
  // Inserts or replaces (a later merge of the same pair wins, as in Hugging Face).
  void insert(int32_t left, int32_t right, Merge merge);

  const Merge* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.merge;
      if (s.key == kEmpty) return nullptr;
    }
  }

  // Starts loading the slot of a pair into cache; lookups of many independent pairs go
  // faster when all are prefetched first.
  void prefetch(int32_t left, int32_t right) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[slot_of(pack(left, right))]);
  }

  std::size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  static uint64_t pack(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  std::size_t slot_of(uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }
  void grow();

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
  std::size_t mask_ = 0;
  int shift_ = 64;
};

}  // namespace nanovllm
