#include "tokenizer/word_cache.h"

#include <bit>

namespace nanovllm {

WordCache::WordCache(std::size_t max_words) : max_words_(max_words) {
  // Twice as many slots as words keeps probe sequences short.
  const std::size_t slots = std::bit_ceil(max_words * 2);
  mask_ = slots - 1;
  slots_.resize(slots);
}

void WordCache::insert(std::string_view word, uint64_t hash, const int* ids, std::size_t count) {
  if (word.size() > kMaxWordBytes || words_ >= max_words_ || count > UINT16_MAX) return;
  std::size_t i = hash & mask_;
  while (slots_[i].key_length != kEmpty) i = (i + 1) & mask_;
  Slot& s = slots_[i];
  s.hash = hash;
  s.key_offset = static_cast<uint32_t>(keys_.size());
  s.key_length = static_cast<uint16_t>(word.size());
  s.ids_offset = static_cast<uint32_t>(ids_.size());
  s.id_count = static_cast<uint16_t>(count);
  keys_.append(word);
  ids_.insert(ids_.end(), ids, ids + count);
  ++words_;
}

uint64_t WordCache::hash(std::string_view word) {
  // Eight bytes at a time, each step a multiply and a rotate; the final mix spreads the
  // bits so that the low bits (used for the slot) depend on all of them.
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = word.size() * kMul;
  std::size_t i = 0;
  for (; i + 8 <= word.size(); i += 8) {
    uint64_t chunk;
    std::memcpy(&chunk, word.data() + i, 8);
    h = std::rotl((h ^ chunk) * kMul, 29);
  }
  if (i < word.size()) {
    uint64_t chunk = 0;
    std::memcpy(&chunk, word.data() + i, word.size() - i);
    h = std::rotl((h ^ chunk) * kMul, 29);
  }
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

}  // namespace nanovllm
