// BlockManager: allocation, reference counts, the free list and the prefix cache.
#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/check.h"
#include "scheduler_harness.h"

namespace nanovllm {
namespace {

using testing::iota_tokens;

std::unique_ptr<Sequence> make_seq(std::vector<int> tokens, int64_t id = 0) {
  return std::make_unique<Sequence>(id, std::move(tokens), SamplingParams{}, 0);
}

// What a step does for a sequence: its K/V is written, then its full blocks are published.
void compute_all(BlockManager& manager, Sequence& seq) {
  seq.num_cached_tokens = seq.num_tokens();
  manager.publish_computed_blocks(seq);
}

void expect_consistent(const BlockManager& manager, std::vector<const Sequence*> holders) {
  EXPECT_NO_THROW(manager.check_consistency(holders));
}

std::vector<int> concat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(BlockManager, AllocatesOneBlockPerBlockSizeTokens) {
  BlockManager manager(8, 4, true);
  auto seq = make_seq(iota_tokens(10));
  ASSERT_TRUE(manager.can_allocate(*seq));
  manager.allocate(*seq);
  EXPECT_EQ(seq->block_table.size(), 3u);
  EXPECT_EQ(seq->num_cached_tokens, 0);
  EXPECT_EQ(manager.num_free_blocks(), 5);
  for (int id : seq->block_table) EXPECT_EQ(manager.block(id).ref_count, 1);
  expect_consistent(manager, {seq.get()});
}

TEST(BlockManager, CannotAllocateMoreBlocksThanFree) {
  BlockManager manager(2, 4, true);
  auto seq = make_seq(iota_tokens(9));
  EXPECT_EQ(manager.num_blocks_to_allocate(*seq), 3);
  EXPECT_FALSE(manager.can_allocate(*seq));
  EXPECT_THROW(manager.allocate(*seq), Error);
  EXPECT_TRUE(seq->block_table.empty());
}

TEST(BlockManager, DeallocateFreesLastBlockFirstAndResetsCachedCount) {
  BlockManager manager(4, 4, true);
  auto seq = make_seq(iota_tokens(12));
  manager.allocate(*seq);
  const std::vector<int> table = seq->block_table;
  compute_all(manager, *seq);
  manager.deallocate(*seq);
  EXPECT_TRUE(seq->block_table.empty());
  EXPECT_EQ(seq->num_cached_tokens, 0);
  EXPECT_EQ(seq->num_published_blocks, 0);
  EXPECT_EQ(manager.num_free_blocks(), 4);
  // The untouched block first, then the sequence's blocks from its last to its first, so its
  // first (most shareable) block is the last to be reused.
  const std::vector<int> free_ids = manager.free_block_ids();
  ASSERT_EQ(free_ids.size(), 4u);
  EXPECT_EQ(free_ids[1], table[2]);
  EXPECT_EQ(free_ids[2], table[1]);
  EXPECT_EQ(free_ids[3], table[0]);
  expect_consistent(manager, {});
}

TEST(BlockManager, OnlyFullComputedBlocksArePublished) {
  BlockManager manager(8, 4, true);
  auto seq = make_seq(iota_tokens(10));
  manager.allocate(*seq);
  EXPECT_TRUE(manager.hash_table().empty());
  seq->num_cached_tokens = 6;  // block 0 full, block 1 half written
  manager.publish_computed_blocks(*seq);
  EXPECT_EQ(manager.hash_table().size(), 1u);
  EXPECT_TRUE(manager.block(seq->block_table[0]).has_hash);
  EXPECT_FALSE(manager.block(seq->block_table[1]).has_hash);
  compute_all(manager, *seq);  // 10 tokens: blocks 0 and 1 full, block 2 partial
  EXPECT_EQ(manager.hash_table().size(), 2u);
  EXPECT_FALSE(manager.block(seq->block_table[2]).has_hash);
  EXPECT_EQ(seq->num_published_blocks, 2);
  expect_consistent(manager, {seq.get()});
}

TEST(BlockManager, PrefixHitSharesBlocksAndCountsCachedTokens) {
  BlockManager manager(8, 4, true);
  auto first = make_seq(iota_tokens(10), 0);
  manager.allocate(*first);
  compute_all(manager, *first);
  auto second = make_seq(concat(iota_tokens(8), {50, 51, 52}), 1);
  EXPECT_EQ(manager.num_blocks_to_allocate(*second), 1);
  manager.allocate(*second);
  EXPECT_EQ(second->num_cached_tokens, 8);
  EXPECT_EQ(second->num_published_blocks, 2);
  EXPECT_EQ(second->block_table[0], first->block_table[0]);
  EXPECT_EQ(second->block_table[1], first->block_table[1]);
  EXPECT_NE(second->block_table[2], first->block_table[2]);
  EXPECT_EQ(manager.block(first->block_table[0]).ref_count, 2);
  EXPECT_EQ(manager.block(first->block_table[1]).ref_count, 2);
  EXPECT_EQ(manager.block(second->block_table[2]).ref_count, 1);
  expect_consistent(manager, {first.get(), second.get()});
  manager.deallocate(*first);
  EXPECT_EQ(manager.block(second->block_table[0]).ref_count, 1);
  expect_consistent(manager, {second.get()});
}

TEST(BlockManager, EqualBlockAfterDifferentPrefixMisses) {
  BlockManager manager(8, 4, true);
  auto first = make_seq(concat(iota_tokens(4, 1), concat(iota_tokens(4, 20), {99})), 0);
  manager.allocate(*first);
  compute_all(manager, *first);
  // Block 1 holds the same tokens, but after a different block 0: its K/V differs.
  auto second = make_seq(concat(iota_tokens(4, 100), concat(iota_tokens(4, 20), {99})), 1);
  manager.allocate(*second);
  EXPECT_EQ(second->num_cached_tokens, 0);
  EXPECT_NE(second->block_table[1], first->block_table[1]);
  expect_consistent(manager, {first.get(), second.get()});
}

TEST(BlockManager, MissIsStickyForTheRestOfTheSequence) {
  BlockManager manager(16, 4, true);
  auto first = make_seq(iota_tokens(13), 0);
  manager.allocate(*first);
  compute_all(manager, *first);
  std::vector<int> tokens = iota_tokens(13);
  tokens[5] = 77;  // block 1 differs; blocks 0 and 2 equal the first sequence's
  auto second = make_seq(tokens, 1);
  manager.allocate(*second);
  EXPECT_EQ(second->num_cached_tokens, 4);
  EXPECT_EQ(second->block_table[0], first->block_table[0]);
  EXPECT_NE(second->block_table[2], first->block_table[2]);
  expect_consistent(manager, {first.get(), second.get()});
}

// Every block of the same tokens gets the same hash whatever came before: collisions galore.
uint64_t colliding_hash(std::span<const int> tokens, std::optional<uint64_t>) {
  uint64_t sum = 0;
  for (int token : tokens) sum += static_cast<uint64_t>(token);
  return sum;
}

TEST(BlockManager, TokenIdsComparedOnHashHit) {
  BlockManager manager(8, 4, true, &colliding_hash);
  auto first = make_seq({1, 2, 3, 4, 9}, 0);
  manager.allocate(*first);
  compute_all(manager, *first);
  auto second = make_seq({4, 3, 2, 1, 9}, 1);  // same sum, different tokens
  manager.allocate(*second);
  EXPECT_EQ(second->num_cached_tokens, 0);
  EXPECT_NE(second->block_table[0], first->block_table[0]);
  expect_consistent(manager, {first.get(), second.get()});
  compute_all(manager, *second);  // its block keeps the hash; the table keeps the first block
  EXPECT_EQ(manager.hash_table().at(10), first->block_table[0]);
  expect_consistent(manager, {first.get(), second.get()});
}

TEST(BlockManager, FreedCachedBlocksStayFindableUntilReused) {
  BlockManager manager(6, 4, true);
  auto first = make_seq(iota_tokens(9), 0);
  manager.allocate(*first);
  compute_all(manager, *first);
  const std::vector<int> first_table = first->block_table;
  manager.deallocate(*first);
  EXPECT_EQ(manager.num_free_blocks(), 6);
  auto second = make_seq(concat(iota_tokens(8), {40}), 1);
  EXPECT_EQ(manager.num_blocks_to_allocate(*second), 3);  // two revived, one fresh
  manager.allocate(*second);
  EXPECT_EQ(second->num_cached_tokens, 8);
  EXPECT_EQ(second->block_table[0], first_table[0]);
  EXPECT_EQ(second->block_table[1], first_table[1]);
  EXPECT_EQ(manager.num_free_blocks(), 3);
  expect_consistent(manager, {second.get()});
}

TEST(BlockManager, CanAllocateCountsHitsOnLiveBlocksAsFree) {
  BlockManager manager(4, 4, true);
  auto first = make_seq(iota_tokens(9), 0);
  manager.allocate(*first);
  compute_all(manager, *first);
  EXPECT_EQ(manager.num_free_blocks(), 1);
  auto second = make_seq(concat(iota_tokens(8), {60}), 1);  // 3 blocks, 2 shared
  EXPECT_EQ(manager.num_blocks_to_allocate(*second), 1);
  EXPECT_TRUE(manager.can_allocate(*second));
  manager.allocate(*second);
  EXPECT_EQ(manager.num_free_blocks(), 0);
  expect_consistent(manager, {first.get(), second.get()});
}

TEST(BlockManager, AppendNeedsANewBlockOnlyPastABlockBoundary) {
  BlockManager manager(3, 4, true);
  auto seq = make_seq(iota_tokens(8));
  manager.allocate(*seq);
  compute_all(manager, *seq);
  seq->token_ids.push_back(100);  // token 9 starts block 2
  EXPECT_TRUE(manager.can_append(*seq));
  manager.may_append(*seq);
  EXPECT_EQ(seq->block_table.size(), 3u);
  EXPECT_EQ(manager.num_free_blocks(), 0);
  seq->num_cached_tokens = 9;
  seq->token_ids.push_back(101);  // token 10 fits block 2
  EXPECT_TRUE(manager.can_append(*seq));
  manager.may_append(*seq);
  EXPECT_EQ(seq->block_table.size(), 3u);
  expect_consistent(manager, {seq.get()});
}

TEST(BlockManager, CannotAppendWithoutAFreeBlockAtABoundary) {
  BlockManager manager(2, 4, true);
  auto seq = make_seq(iota_tokens(8));
  manager.allocate(*seq);
  compute_all(manager, *seq);
  seq->token_ids.push_back(100);
  EXPECT_FALSE(manager.can_append(*seq));
}

TEST(BlockManager, DecodedFullBlockPublishedAfterItsLastTokenIsComputed) {
  BlockManager manager(4, 4, true);
  auto seq = make_seq(iota_tokens(3));
  manager.allocate(*seq);
  compute_all(manager, *seq);
  EXPECT_TRUE(manager.hash_table().empty());
  seq->token_ids.push_back(50);  // the 4th token fills block 0, but its K/V is not written yet
  manager.may_append(*seq);
  EXPECT_TRUE(manager.hash_table().empty());
  compute_all(manager, *seq);
  EXPECT_EQ(manager.hash_table().size(), 1u);
  expect_consistent(manager, {seq.get()});
}

TEST(BlockManager, PrefixCachingOffNeverShares) {
  BlockManager manager(8, 4, false);
  auto first = make_seq(iota_tokens(9), 0);
  manager.allocate(*first);
  compute_all(manager, *first);
  EXPECT_TRUE(manager.hash_table().empty());
  auto second = make_seq(iota_tokens(9), 1);
  manager.allocate(*second);
  EXPECT_EQ(second->num_cached_tokens, 0);
  for (int id : second->block_table) EXPECT_EQ(manager.block(id).ref_count, 1);
  expect_consistent(manager, {first.get(), second.get()});
}

TEST(BlockManager, ConsistencyCheckCatchesAMissingHolder) {
  BlockManager manager(4, 4, true);
  auto seq = make_seq(iota_tokens(5));
  manager.allocate(*seq);
  const std::vector<const Sequence*> nobody;
  EXPECT_THROW(manager.check_consistency(nobody), Error);
}

TEST(BlockManager, ChainedHashDependsOnTokensAndPrefix) {
  const std::vector<int> tokens = {1, 2, 3, 4};
  const uint64_t plain = BlockManager::compute_hash(tokens, std::nullopt);
  EXPECT_EQ(plain, BlockManager::compute_hash(tokens, std::nullopt));
  EXPECT_NE(plain, BlockManager::compute_hash(tokens, uint64_t{7}));
  EXPECT_NE(BlockManager::compute_hash(tokens, uint64_t{7}),
            BlockManager::compute_hash(tokens, uint64_t{8}));
  EXPECT_NE(plain, BlockManager::compute_hash(std::vector<int>{1, 2, 4, 3}, std::nullopt));
}

}  // namespace
}  // namespace nanovllm
