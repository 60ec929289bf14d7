// Host pieces of the model runner that need no model: batch layout, KV cache sizing, and the
// progress line.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "core/check.h"
#include "engine/batch_inputs.h"
#include "engine/kv_cache_sizing.h"
#include "engine/progress.h"
#include "engine/step_inputs.h"
#include "kernels/backend.h"

namespace nanovllm {
namespace {

std::unique_ptr<Sequence> make_seq(int64_t id, std::vector<int> tokens, int cached,
                                   std::vector<int> block_table) {
  auto seq = std::make_unique<Sequence>(id, std::move(tokens), SamplingParams{}, 0);
  seq->num_cached_tokens = cached;
  seq->block_table = std::move(block_table);
  return seq;
}

BatchInputCapacity capacity(int tokens, int seqs, int blocks) {
  BatchInputCapacity c;
  c.max_tokens = tokens;
  c.max_seqs = seqs;
  c.max_blocks_per_seq = blocks;
  return c;
}

TEST(BatchInputs, LaysOutCachedPrefixAndPromptChunk) {
  // a: 10 tokens, 4 cached (a prefix hit), computes 6 and samples.
  // b: 3 tokens, computes its first 2 (a prompt chunk, no sample).
  auto a = make_seq(0, {10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, 4, {5, 2, 7});
  auto b = make_seq(1, {30, 31, 32}, 0, {1});
  ScheduledBatch batch;
  batch.is_prefill = true;
  batch.seqs = {{a.get(), 6, true}, {b.get(), 2, false}};
  BatchInputs inputs(capacity(16, 4, 8));
  inputs.build(batch, 4);
  using V = std::vector<int32_t>;
  EXPECT_EQ(inputs.input_ids, (V{14, 15, 16, 17, 18, 19, 30, 31}));
  EXPECT_EQ(inputs.positions, (V{4, 5, 6, 7, 8, 9, 0, 1}));
  EXPECT_EQ(inputs.slot_mapping, (V{8, 9, 10, 11, 28, 29, 4, 5}));
  EXPECT_EQ(inputs.cu_seqlens_q, (V{0, 6, 8}));
  EXPECT_EQ(inputs.context_lens, (V{10, 2}));
  EXPECT_EQ(inputs.block_table_width(), 3);
  EXPECT_EQ(inputs.block_tables, (V{5, 2, 7, 1, -1, -1}));
  EXPECT_EQ(inputs.last_token_indices, (V{5}));
  EXPECT_EQ(inputs.num_sampling(), 1);
  EXPECT_EQ(inputs.max_seqlen_q(), 6);
  EXPECT_EQ(inputs.max_seqlen_k(), 10);
}

// The attention metadata carries host copies of the lengths for backends that plan prefill
// on the host: the values uploaded, still intact once the next step has been built (the
// forward of a step is enqueued before the build after next reuses its buffer).
TEST(StepInputs, AttentionLengthsOnTheHostMatchTheDeviceAndOutliveTheNextBuild) {
  auto backend = make_cpu_backend(1);
  StepInputs step_inputs(capacity(16, 4, 8), *backend);
  auto a = make_seq(0, {10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, 4, {5, 2, 7});
  auto b = make_seq(1, {30, 31, 32}, 0, {1});
  ScheduledBatch first;
  first.is_prefill = true;
  first.seqs = {{a.get(), 6, true}, {b.get(), 2, false}};
  BatchInputs inputs(capacity(16, 4, 8));
  inputs.build(first, 4);
  step_inputs.build(inputs);
  step_inputs.upload();
  const AttentionMetadata metadata = step_inputs.forward_batch().attention;
  using V = std::vector<int32_t>;
  ASSERT_NE(metadata.host_cu_seqlens_q, nullptr);
  ASSERT_NE(metadata.host_context_lens, nullptr);
  V on_device(3);
  backend->download(on_device.data(), metadata.cu_seqlens_q);
  EXPECT_EQ(on_device, (V{0, 6, 8}));
  EXPECT_EQ(V(metadata.host_cu_seqlens_q, metadata.host_cu_seqlens_q + 3), on_device);
  on_device.resize(2);
  backend->download(on_device.data(), metadata.context_lens);
  EXPECT_EQ(on_device, (V{10, 2}));
  EXPECT_EQ(V(metadata.host_context_lens, metadata.host_context_lens + 2), on_device);

  ScheduledBatch second;
  second.seqs = {{a.get(), 1, true}};
  a->num_cached_tokens = 9;
  inputs.build(second, 4);
  step_inputs.build(inputs);
  step_inputs.upload();
  EXPECT_EQ(step_inputs.forward_batch().attention.host_context_lens[0], 10);
  EXPECT_EQ(V(metadata.host_cu_seqlens_q, metadata.host_cu_seqlens_q + 3), (V{0, 6, 8}));
  EXPECT_EQ(V(metadata.host_context_lens, metadata.host_context_lens + 2), (V{10, 2}));
}

TEST(BatchInputs, DecodeRowsAreEachSequencesLastToken) {
  auto a = make_seq(0, {1, 2, 3, 4, 5}, 4, {3, 6});
  auto b = make_seq(1, {7, 8}, 1, {0});
  ScheduledBatch batch;
  batch.seqs = {{a.get(), 1, true}, {b.get(), 1, true}};
  BatchInputs inputs(capacity(16, 4, 8));
  inputs.build(batch, 4);
  using V = std::vector<int32_t>;
  EXPECT_EQ(inputs.input_ids, (V{5, 8}));
  EXPECT_EQ(inputs.positions, (V{4, 1}));
  EXPECT_EQ(inputs.slot_mapping, (V{24, 1}));
  EXPECT_EQ(inputs.context_lens, (V{5, 2}));
  EXPECT_EQ(inputs.last_token_indices, (V{0, 1}));
  EXPECT_EQ(inputs.block_tables, (V{3, 6, 0, -1}));
}

// A decode step planned before the step before is applied: each row is the token that step is
// sampling (its id comes from the device, row input_row of those samples), one position on.
TEST(BatchInputs, RowsPlannedAheadTakeTheirTokenFromTheDevice) {
  auto a = make_seq(0, {1, 2, 3, 4, 5}, 4, {3, 6});  // position 4 is being computed
  auto b = make_seq(1, {7, 8, 9, 10}, 3, {0, 2});
  ScheduledBatch batch;
  batch.seqs = {{b.get(), 1, true, 1}, {a.get(), 1, true, 0}};
  BatchInputs inputs(capacity(16, 4, 8));
  inputs.build(batch, 4);
  using V = std::vector<int32_t>;
  EXPECT_EQ(inputs.input_rows, (V{1, 0}));
  EXPECT_EQ(inputs.input_ids, (V{0, 0}));
  EXPECT_EQ(inputs.positions, (V{4, 5}));
  EXPECT_EQ(inputs.slot_mapping, (V{8, 25}));
  EXPECT_EQ(inputs.context_lens, (V{5, 6}));
  // Mixing rows planned ahead with others, or an entry not one token past the cached ones, is
  // a scheduling error.
  batch.seqs[1].input_row = -1;
  EXPECT_THROW(inputs.build(batch, 4), Error);
  batch.seqs[1].input_row = 0;
  a->num_cached_tokens = 3;
  EXPECT_THROW(inputs.build(batch, 4), Error);
}

TEST(BatchInputs, BatchWithoutSamplingStillNamesOneRow) {
  auto a = make_seq(0, {1, 2, 3, 4, 5, 6}, 0, {0, 1});
  ScheduledBatch batch;
  batch.is_prefill = true;
  batch.seqs = {{a.get(), 3, false}};
  BatchInputs inputs(capacity(16, 4, 8));
  inputs.build(batch, 4);
  EXPECT_EQ(inputs.num_sampling(), 0);
  EXPECT_EQ(inputs.last_token_indices, (std::vector<int32_t>{2}));
}

TEST(BatchInputs, RejectsBatchesBeyondCapacityOrBlocks) {
  auto a = make_seq(0, {1, 2, 3, 4, 5, 6}, 0, {0, 1});
  ScheduledBatch batch;
  batch.seqs = {{a.get(), 6, true}};
  BatchInputs small(capacity(4, 4, 8));
  EXPECT_THROW(small.build(batch, 4), Error);
  auto short_table = make_seq(1, {1, 2, 3, 4, 5, 6}, 0, {0});
  batch.seqs = {{short_table.get(), 6, true}};
  BatchInputs inputs(capacity(16, 4, 8));
  EXPECT_THROW(inputs.build(batch, 4), Error);
}

KVCacheShape qwen3_06b_shape(DType dtype) {
  KVCacheShape shape;
  shape.num_layers = 28;
  shape.num_kv_heads = 8;
  shape.head_dim = 128;
  shape.block_size = 256;
  shape.dtype = dtype;
  return shape;
}

TEST(KVCacheSizing, BlockBytesMatchQwen3Numbers) {
  // 112 KiB per token in bf16 (design notes, section 5).
  EXPECT_EQ(qwen3_06b_shape(DType::kBF16).bytes_per_block(), size_t{112} * 1024 * 256);
  EXPECT_EQ(qwen3_06b_shape(DType::kF32).bytes_per_block(), size_t{224} * 1024 * 256);
}

// A config with absurd sizes is an error, not a wrapped-around (even zero) block size.
TEST(KVCacheSizing, SizesThatOverflowAreErrors) {
  KVCacheShape shape = qwen3_06b_shape(DType::kF32);
  shape.num_layers = 1 << 30;
  shape.num_kv_heads = 1 << 20;
  EXPECT_THROW(shape.bytes_per_block(), Error);
  EXPECT_THROW(cpu_num_kvcache_blocks(shape, size_t{4} << 30, size_t{64} << 30, 512, 4096), Error);
  KVCacheShape deep = qwen3_06b_shape(DType::kF32);
  deep.num_layers = 1 << 16;  // 128 GiB per block
  EXPECT_EQ(deep.bytes_for_blocks(3), 3 * deep.bytes_per_block());
  EXPECT_THROW(deep.bytes_for_blocks(1 << 30), Error);
}

TEST(KVCacheSizing, CpuUsesTheBudgetBoundedByMemoryAndUse) {
  const KVCacheShape shape = qwen3_06b_shape(DType::kBF16);  // 28 MiB per block
  const size_t gib = size_t{1} << 30;
  EXPECT_EQ(cpu_num_kvcache_blocks(shape, 4 * gib, 64 * gib, 512, 4096), 146);
  EXPECT_EQ(cpu_num_kvcache_blocks(shape, 4 * gib, 4 * gib, 512, 4096), 73);  // half of 4 GiB
  EXPECT_EQ(cpu_num_kvcache_blocks(shape, 4 * gib, 64 * gib, 2, 300), 4);     // 2 seqs x 2 blocks
  EXPECT_THROW(cpu_num_kvcache_blocks(shape, 1 << 20, 64 * gib, 512, 4096), Error);
}

TEST(KVCacheSizing, GpuFollowsNanoVllmFormula) {
  const KVCacheShape shape = qwen3_06b_shape(DType::kBF16);
  const size_t gib = size_t{1} << 30;
  const size_t block = shape.bytes_per_block();
  const double available = 80.0 * gib * 0.9 - 10.0 * gib - 2.0 * gib;
  EXPECT_EQ(gpu_num_kvcache_blocks(shape, 80 * gib, 10 * gib, 2 * gib, 0.9),
            static_cast<int>(static_cast<size_t>(available) / block));
  EXPECT_THROW(gpu_num_kvcache_blocks(shape, 80 * gib, 75 * gib, 0, 0.9), Error);
}

TEST(Progress, FormatsCountsTimesAndThroughput) {
  EXPECT_EQ(format_progress(95, 256, 12.4, 12345.6, 6789.1),
            "Generating: 95/256 [00:12<00:21, Prefill=12345tok/s, Decode=6789tok/s]");
  EXPECT_EQ(format_progress(0, 8, 0.0, 0, 0),
            "Generating: 0/8 [00:00<?, Prefill=0tok/s, Decode=0tok/s]");
  EXPECT_EQ(format_progress(1, 2, 3725.0, 1, 2),
            "Generating: 1/2 [1:02:05<1:02:05, Prefill=1tok/s, Decode=2tok/s]");
}

TEST(Progress, WritesPlainLinesWhenNotATerminal) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressLine progress(3, true, file);
    progress.add_step(1, 100, 0, 0.5);
    progress.add_step(2, 0, 2, 0.25);
    progress.close();
  }
  std::rewind(file);
  std::string text;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, file)) text += buffer;
  std::fclose(file);
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_NE(text.find("Generating: 0/3"), std::string::npos) << text;
  EXPECT_NE(text.find("Generating: 3/3"), std::string::npos) << text;
  EXPECT_NE(text.find("Prefill=200tok/s"), std::string::npos) << text;
  EXPECT_NE(text.find("Decode=8tok/s"), std::string::npos) << text;
}

TEST(Progress, DisabledWritesNothing) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressLine progress(3, false, file);
    progress.add_step(3, 10, 0, 0.1);
  }
  EXPECT_EQ(std::ftell(file), 0);
  std::fclose(file);
}

}  // namespace
}  // namespace nanovllm
