// A bounded, thread-safe cache from a pre-tokenized word to its token ids. Text repeats
// words constantly, so most words skip BPE merging. Sharded so that threads encoding at the
// same time rarely wait on each other; once a shard is full it stops taking new words.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nanovllm {

class WordCache {
 public:
  // Words longer than this are not cached (they are rare and would hog memory).
  static constexpr std::size_t kMaxWordBytes = 64;

  explicit WordCache(std::size_t capacity = 1 << 17) : shard_capacity_(capacity / kShards + 1) {}

  // Appends the cached ids of word to out and returns true, or returns false.
  bool lookup(std::string_view word, std::size_t hash, std::vector<int>& out) const {
    const Shard& shard = shards_[hash % kShards];
    std::shared_lock lock(shard.mutex);
    const auto it = shard.map.find(word);
    if (it == shard.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }

  void insert(std::string_view word, std::size_t hash, const int* ids, std::size_t count) {
    if (word.size() > kMaxWordBytes) return;
    Shard& shard = shards_[hash % kShards];
    std::unique_lock lock(shard.mutex, std::try_to_lock);
    if (!lock.owns_lock() || shard.map.size() >= shard_capacity_) return;
    shard.map.emplace(std::string(word), std::vector<int>(ids, ids + count));
  }

  static std::size_t hash(std::string_view word) { return std::hash<std::string_view>{}(word); }

 private:
  static constexpr std::size_t kShards = 16;

  struct TransparentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    mutable std::shared_mutex mutex;
    std::unordered_map<std::string, std::vector<int>, TransparentHash, std::equal_to<>> map;
  };

  std::size_t shard_capacity_;
  std::array<Shard, kShards> shards_;
};

}  // namespace nanovllm
