// The pool of KV cache blocks: reference counts, a free list, and the prefix cache.
//
// Prefix caching: a full block is identified by a chained xxhash64 over its token ids and the
// hash of the block before it, so equal hashes mean equal prefixes. A block's hash is published
// (made findable) only after the step that wrote its K/V, so nobody can hit a block whose
// contents are not there yet. Freed blocks keep their hash and stay findable until they are
// handed out again; reuse removes their hash-table entry. On a lookup the token ids are
// compared too (hash collisions), and the first miss ends the lookup for the rest of the
// sequence. The block holding a sequence's last token is never taken from the cache, so a
// sequence always has at least one token to compute.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sequence.h"

namespace nanovllm {

struct Block {
  int id = 0;
  int ref_count = 0;
  bool has_hash = false;
  uint64_t hash = 0;
  std::vector<int> token_ids;  // the full block's tokens, kept while it is hashed
};

// hash(token ids of a full block, hash of the block before it (none for the first block)).
using BlockHashFn = uint64_t (*)(std::span<const int> token_ids, std::optional<uint64_t> prefix);

// Called before blocks are handed to a sequence; what it throws is an allocation that sequence
// cannot get. A seam for fault-injection tests: nothing is installed otherwise.
using BlockAllocationHook = std::function<void(const Sequence& seq)>;

class BlockManager {
 public:
  // `hash_fn` is replaceable so tests can force collisions.
  BlockManager(int num_blocks, int block_size, bool enable_prefix_caching,
               BlockHashFn hash_fn = &BlockManager::compute_hash);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int block_size() const { return block_size_; }
  bool prefix_caching() const { return enable_prefix_caching_; }
  int num_free_blocks() const { return free_count_; }

  // Blocks an allocation of `seq` would take from the free list now (cache hits on blocks in
  // use are shared, hits on freed blocks and misses each take one).
  int num_blocks_to_allocate(const Sequence& seq) const;
  bool can_allocate(const Sequence& seq) const;
  // Gives `seq` (which holds no blocks) blocks for all its tokens, sharing cached prefix
  // blocks; sets num_cached_tokens to the tokens found in the cache. If it throws, nothing
  // changed.
  void allocate(Sequence& seq);
  // Drops `seq`'s references; blocks nobody holds go back to the free list, still findable.
  // Resets the sequence's cached-token count: its K/V must be recomputed when it comes back.
  void deallocate(Sequence& seq);

  // Whether `seq` can get a slot for its last token (which has no K/V yet), or with
  // `pending_tokens` more, for tokens sampled on the device that the host has not appended yet.
  bool can_append(const Sequence& seq, int pending_tokens = 0) const;
  // If it throws, nothing changed.
  void may_append(Sequence& seq, int pending_tokens = 0);

  // After a step wrote K/V for `seq` up to num_cached_tokens: publishes its full blocks. If it
  // throws, the blocks published so far stay consistent.
  void publish_computed_blocks(Sequence& seq);

  void set_allocation_hook(BlockAllocationHook hook) { allocation_hook_ = std::move(hook); }

  // Inspection, for tests and consistency checks.
  const Block& block(int id) const { return blocks_.at(id); }
  std::vector<int> free_block_ids() const;  // in the order they will be handed out
  const std::unordered_map<uint64_t, int>& hash_table() const { return hash_to_block_; }
  // Throws Error unless: every block's ref count equals its references in `holders`' block
  // tables, the free list holds exactly the blocks with ref count 0, and every hash-table
  // entry names a block carrying that hash.
  void check_consistency(std::span<const Sequence* const> holders) const;

  static uint64_t compute_hash(std::span<const int> token_ids, std::optional<uint64_t> prefix);

 private:
  // Cached blocks matching the leading full blocks of `seq`, never the block of its last token.
  std::vector<int> find_cached_prefix(const Sequence& seq) const;
  // Takes the block at the head of the free list, dropping its stale hash.
  int take_free_block();
  void unlink_free(int id);
  void push_free_back(int id);

  int block_size_;
  bool enable_prefix_caching_;
  BlockHashFn hash_fn_;
  BlockAllocationHook allocation_hook_;
  std::vector<Block> blocks_;
  std::unordered_map<uint64_t, int> hash_to_block_;
  // Free list as an intrusive doubly linked list over block ids (O(1) removal of a cached
  // block that is hit again); handed out from the head, freed blocks appended at the tail.
  std::vector<int> free_prev_;
  std::vector<int> free_next_;
  std::vector<bool> is_free_;
  int free_head_ = -1;
  int free_tail_ = -1;
  int free_count_ = 0;
};

}  // namespace nanovllm
