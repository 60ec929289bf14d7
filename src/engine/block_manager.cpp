#include "engine/block_manager.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/check.h"

namespace nanovllm {

BlockManager::BlockManager(int num_blocks, int block_size, bool enable_prefix_caching,
                           BlockHashFn hash_fn)
    : block_size_(block_size), enable_prefix_caching_(enable_prefix_caching), hash_fn_(hash_fn) {
  NVLLM_CHECK(hash_fn != nullptr);
  NVLLM_CHECK_GT(num_blocks, 0);
  NVLLM_CHECK_GT(block_size, 0);
  blocks_.resize(num_blocks);
  free_prev_.assign(num_blocks, -1);
  free_next_.assign(num_blocks, -1);
  is_free_.assign(num_blocks, false);
  for (int id = 0; id < num_blocks; ++id) {
    blocks_[id].id = id;
    push_free_back(id);
  }
}

uint64_t BlockManager::compute_hash(std::span<const int> token_ids,
                                    std::optional<uint64_t> prefix) {
  static_assert(std::endian::native == std::endian::little, "hash bytes assume little endian");
  // Bytes: the previous block's hash (8, little endian) when there is one, then the tokens as
  // int32. Thread-local scratch keeps hashing allocation-free.
  thread_local std::vector<unsigned char> bytes;
  const size_t prefix_bytes = prefix ? sizeof(uint64_t) : 0;
  bytes.resize(prefix_bytes + token_ids.size_bytes());
  if (prefix) std::memcpy(bytes.data(), &*prefix, sizeof(uint64_t));
  std::memcpy(bytes.data() + prefix_bytes, token_ids.data(), token_ids.size_bytes());
  return XXH64(bytes.data(), bytes.size(), 0);
}

std::vector<int> BlockManager::find_cached_prefix(const Sequence& seq) const {
  std::vector<int> hits;
  if (!enable_prefix_caching_) return hits;
  // Only blocks that end before the last token: the last token is always computed.
  const int max_hit_blocks = (seq.num_tokens() - 1) / block_size_;
  std::optional<uint64_t> prefix;
  for (int i = 0; i < max_hit_blocks; ++i) {
    const std::span<const int> tokens = seq.block_tokens(i, block_size_);
    const uint64_t hash = hash_fn_(tokens, prefix);
    const auto it = hash_to_block_.find(hash);
    if (it == hash_to_block_.end()) break;
    const Block& candidate = blocks_[it->second];
    if (!std::equal(tokens.begin(), tokens.end(), candidate.token_ids.begin(),
                    candidate.token_ids.end()))
      break;  // a hash collision; the rest of the sequence misses too
    hits.push_back(candidate.id);
    prefix = hash;
  }
  return hits;
}

int BlockManager::num_blocks_to_allocate(const Sequence& seq) const {
  const std::vector<int> hits = find_cached_prefix(seq);
  int shared = 0;
  for (int id : hits) shared += blocks_[id].ref_count > 0 ? 1 : 0;
  return seq.num_blocks(block_size_) - shared;
}

bool BlockManager::can_allocate(const Sequence& seq) const {
  return num_blocks_to_allocate(seq) <= free_count_;
}

void BlockManager::allocate(Sequence& seq) {
  NVLLM_CHECK_MSG(seq.block_table.empty(), "sequence {} already holds blocks", seq.id);
  NVLLM_CHECK_MSG(can_allocate(seq), "sequence {} needs {} blocks, {} free", seq.id,
                  num_blocks_to_allocate(seq), free_count_);
  if (allocation_hook_) allocation_hook_(seq);
  const std::vector<int> hits = find_cached_prefix(seq);
  const int total = seq.num_blocks(block_size_);
  // Everything that may throw comes before the first block changes hands.
  seq.block_table.reserve(total);
  for (int id : hits) {
    Block& block = blocks_[id];
    if (block.ref_count == 0) unlink_free(id);  // a freed block brought back, K/V intact
    ++block.ref_count;
    seq.block_table.push_back(id);
  }
  while (static_cast<int>(seq.block_table.size()) < total) {
    seq.block_table.push_back(take_free_block());
  }
  seq.num_cached_tokens = static_cast<int>(hits.size()) * block_size_;
  seq.num_published_blocks = static_cast<int>(hits.size());
}

void BlockManager::deallocate(Sequence& seq) {
  // Last block first, so a sequence's early (most shareable) blocks are reused last.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    Block& block = blocks_[*it];
    NVLLM_CHECK_GT(block.ref_count, 0);
    if (--block.ref_count == 0) push_free_back(block.id);
  }
  seq.block_table.clear();
  seq.num_cached_tokens = 0;
  seq.num_published_blocks = 0;
}

namespace {

// Blocks that hold `seq`'s tokens and `pending_tokens` more.
int blocks_for(const Sequence& seq, int pending_tokens, int block_size) {
  return (seq.num_tokens() + pending_tokens + block_size - 1) / block_size;
}

}  // namespace

bool BlockManager::can_append(const Sequence& seq, int pending_tokens) const {
  const bool needs_block =
      static_cast<int>(seq.block_table.size()) < blocks_for(seq, pending_tokens, block_size_);
  return free_count_ >= (needs_block ? 1 : 0);
}

void BlockManager::may_append(Sequence& seq, int pending_tokens) {
  const int needed = blocks_for(seq, pending_tokens, block_size_);
  const int held = static_cast<int>(seq.block_table.size());
  if (held == needed) return;
  NVLLM_CHECK_EQ(held + 1, needed);
  NVLLM_CHECK_GT(free_count_, 0);
  if (allocation_hook_) allocation_hook_(seq);
  seq.block_table.reserve(needed);  // so the push_back below cannot throw
  seq.block_table.push_back(take_free_block());
}

void BlockManager::publish_computed_blocks(Sequence& seq) {
  if (!enable_prefix_caching_) return;
  const int full_blocks = seq.num_cached_tokens / block_size_;
  NVLLM_CHECK_LE(full_blocks, static_cast<int>(seq.block_table.size()));
  for (int i = seq.num_published_blocks; i < full_blocks; ++i) {
    Block& block = blocks_[seq.block_table[i]];
    NVLLM_CHECK_MSG(!block.has_hash && block.ref_count == 1,
                    "block {} of sequence {} is being published twice (ref count {})", block.id,
                    seq.id, block.ref_count);
    std::optional<uint64_t> prefix;
    if (i > 0) prefix = blocks_[seq.block_table[i - 1]].hash;
    const std::span<const int> tokens = seq.block_tokens(i, block_size_);
    const uint64_t hash = hash_fn_(tokens, prefix);
    // The steps that may throw come first; the block carries its hash only once it is listed.
    block.token_ids.assign(tokens.begin(), tokens.end());
    // Two sequences may have computed the same new block in one step: the first published
    // copy stays the findable one; the other keeps its hash only to chain its successors.
    hash_to_block_.try_emplace(hash, block.id);
    block.hash = hash;
    block.has_hash = true;
    seq.num_published_blocks = i + 1;
  }
}

int BlockManager::take_free_block() {
  NVLLM_CHECK_MSG(free_head_ != -1, "no free KV cache block");
  const int id = free_head_;
  unlink_free(id);
  Block& block = blocks_[id];
  NVLLM_CHECK_EQ(block.ref_count, 0);
  if (block.has_hash) {
    // Its K/V is about to be overwritten: it must no longer be found under its old hash.
    const auto it = hash_to_block_.find(block.hash);
    if (it != hash_to_block_.end() && it->second == id) hash_to_block_.erase(it);
    block.has_hash = false;
    block.hash = 0;
    block.token_ids.clear();
  }
  block.ref_count = 1;
  return id;
}

void BlockManager::unlink_free(int id) {
  NVLLM_CHECK(is_free_[id]);
  const int prev = free_prev_[id];
  const int next = free_next_[id];
  (prev == -1 ? free_head_ : free_next_[prev]) = next;
  (next == -1 ? free_tail_ : free_prev_[next]) = prev;
  free_prev_[id] = free_next_[id] = -1;
  is_free_[id] = false;
  --free_count_;
}

void BlockManager::push_free_back(int id) {
  NVLLM_CHECK(!is_free_[id]);
  free_prev_[id] = free_tail_;
  free_next_[id] = -1;
  (free_tail_ == -1 ? free_head_ : free_next_[free_tail_]) = id;
  free_tail_ = id;
  is_free_[id] = true;
  ++free_count_;
}

std::vector<int> BlockManager::free_block_ids() const {
  std::vector<int> ids;
  ids.reserve(free_count_);
  for (int id = free_head_; id != -1; id = free_next_[id]) ids.push_back(id);
  return ids;
}

void BlockManager::check_consistency(std::span<const Sequence* const> holders) const {
  std::vector<int> references(blocks_.size(), 0);
  for (const Sequence* seq : holders) {
    for (int id : seq->block_table) {
      NVLLM_CHECK_MSG(id >= 0 && id < num_blocks(), "sequence {} holds block id {}", seq->id, id);
      ++references[id];
    }
  }
  int free_seen = 0;
  for (const Block& block : blocks_) {
    NVLLM_CHECK_MSG(block.ref_count == references[block.id],
                    "block {} has ref count {} but {} block-table references", block.id,
                    block.ref_count, references[block.id]);
    NVLLM_CHECK_MSG(is_free_[block.id] == (block.ref_count == 0),
                    "block {} with ref count {} is {}in the free list", block.id, block.ref_count,
                    is_free_[block.id] ? "" : "not ");
    if (is_free_[block.id]) ++free_seen;
  }
  NVLLM_CHECK_EQ(static_cast<int>(free_block_ids().size()), free_count_);
  NVLLM_CHECK_EQ(free_seen, free_count_);
  for (const auto& [hash, id] : hash_to_block_) {
    NVLLM_CHECK_MSG(id >= 0 && id < num_blocks(), "hash table names block id {}", id);
    const Block& block = blocks_[id];
    NVLLM_CHECK_MSG(block.has_hash && block.hash == hash,
                    "hash table entry {:#x} names block {} which carries {}", hash, id,
                    block.has_hash ? fmt::format("{:#x}", block.hash) : "no hash");
    NVLLM_CHECK_EQ(static_cast<int>(block.token_ids.size()), block_size_);
  }
}

}  // namespace nanovllm
