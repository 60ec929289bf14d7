#include "tokenizer/merge_table.h"

#include <bit>

namespace nanovllm {

void MergeTable::insert(int32_t left, int32_t right, Merge merge) {
  // Keep the load factor at or below 3/4: short probe runs, and a table small enough to stay
  // in cache (Qwen's 151k merges fit 256k slots, 4 MB).
  if ((size_ + 1) * 4 > slots_.size() * 3) grow();
  const uint64_t key = pack(left, right);
  for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == key) {
      s.merge = merge;
      return;
    }
    if (s.key == kEmpty) {
      s = {key, merge};
      ++size_;
      return;
    }
  }
}

void MergeTable::grow() {
  const std::size_t capacity = slots_.empty() ? 64 : slots_.size() * 2;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{kEmpty, {0, 0}});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  size_ = 0;
  for (const Slot& s : old) {
    if (s.key != kEmpty)
      insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key), s.merge);
  }
}

}  // namespace nanovllm
