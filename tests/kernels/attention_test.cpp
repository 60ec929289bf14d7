// Paged attention (with store_kv writing this step's keys/values) against dense causal
// attention computed in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel_test_util.h"
#include "kernels/backend.h"

namespace nanovllm {
namespace {

using test::int_matrix;
using test::int_tensor;

struct SeqSpec {
  int cached;  // tokens already in the cache before this step
  int q_len;   // query rows this step; context = cached + q_len
};

struct AttentionCase {
  AttentionDims dims;
  int block_size;
  std::vector<SeqSpec> seqs;
};

// Dense keys/values of one sequence [context, num_kv_heads, head_dim] and its query rows.
struct DenseSeq {
  std::vector<float> k, v, q;  // q: [q_len, num_heads, head_dim]
};

// Softmax(q k^T * scale) v over keys [0, position], in double.
void reference_row(const float* q, const DenseSeq& seq, const AttentionDims& dims, int position,
                   double scale, double* out) {
  const int d = dims.head_dim;
  const int group = dims.num_heads / dims.num_kv_heads;
  for (int h = 0; h < dims.num_heads; ++h) {
    const int g = h / group;
    std::vector<double> scores(position + 1);
    double max_score = -std::numeric_limits<double>::infinity();
    for (int j = 0; j <= position; ++j) {
      double s = 0.0;
      for (int i = 0; i < d; ++i) {
        s += static_cast<double>(q[h * d + i]) * seq.k[(j * dims.num_kv_heads + g) * d + i];
      }
      scores[j] = s * scale;
      max_score = std::max(max_score, scores[j]);
    }
    double denominator = 0.0;
    for (double& s : scores) denominator += (s = std::exp(s - max_score));
    for (int i = 0; i < d; ++i) {
      double acc = 0.0;
      for (int j = 0; j <= position; ++j) {
        acc += scores[j] * seq.v[(j * dims.num_kv_heads + g) * d + i];
      }
      out[h * d + i] = acc / denominator;
    }
  }
}

// Builds the cache (prefix written directly, this step's K/V through store_kv from qkv), block
// tables drawn from a shuffled pool so no sequence's blocks are contiguous or in order, and
// cache slots never written hold NaN so reading one poisons the output.
void run_case(Backend& backend, const AttentionCase& c, std::mt19937& rng) {
  const AttentionDims& dims = c.dims;
  const int d = dims.head_dim;
  const int bs = c.block_size;
  int blocks_needed = 0;
  for (const SeqSpec& s : c.seqs) blocks_needed += (s.cached + s.q_len + bs - 1) / bs;
  const int num_blocks = blocks_needed + 3;
  std::vector<int32_t> pool(num_blocks);
  for (int i = 0; i < num_blocks; ++i) pool[i] = i;
  std::shuffle(pool.begin(), pool.end(), rng);

  OwnedTensor k_cache(DType::kF32, {num_blocks, bs, dims.num_kv_heads, d});
  OwnedTensor v_cache(DType::kF32, {num_blocks, bs, dims.num_kv_heads, d});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::fill_n(k_cache.tensor.data_as<float>(), k_cache.tensor.numel(), nan);
  std::fill_n(v_cache.tensor.data_as<float>(), v_cache.tensor.numel(), nan);

  std::uniform_real_distribution<float> kv_dist(-1.0f, 1.0f);
  std::uniform_real_distribution<float> q_dist(-4.0f, 4.0f);  // peaked softmax
  int total_rows = 0;
  for (const SeqSpec& s : c.seqs) total_rows += s.q_len;
  OwnedTensor qkv(DType::kF32, {total_rows, dims.qkv_size()});
  std::vector<int32_t> cu = {0}, context_lens, slots;
  std::vector<std::vector<int32_t>> tables;
  std::vector<DenseSeq> dense(c.seqs.size());
  int next_block = 0, max_q = 0, max_k = 0, max_table = 0;
  const int64_t slot_width = dims.kv_size();
  for (size_t i = 0; i < c.seqs.size(); ++i) {
    const SeqSpec& s = c.seqs[i];
    const int context = s.cached + s.q_len;
    std::vector<int32_t> table(pool.begin() + next_block,
                               pool.begin() + next_block + (context + bs - 1) / bs);
    next_block += static_cast<int>(table.size());
    DenseSeq& seq = dense[i];
    seq.k.resize(context * slot_width);
    seq.v.resize(context * slot_width);
    seq.q.resize(s.q_len * dims.q_size());
    for (float& x : seq.k) x = kv_dist(rng);
    for (float& x : seq.v) x = kv_dist(rng);
    for (float& x : seq.q) x = q_dist(rng);
    for (int p = 0; p < context; ++p) {
      const int64_t slot = static_cast<int64_t>(table[p / bs]) * bs + p % bs;
      if (p < s.cached) {
        std::copy_n(&seq.k[p * slot_width], slot_width,
                    k_cache.tensor.data_as<float>() + slot * slot_width);
        std::copy_n(&seq.v[p * slot_width], slot_width,
                    v_cache.tensor.data_as<float>() + slot * slot_width);
      } else {
        float* row = qkv.tensor.data_as<float>() + (cu.back() + p - s.cached) * dims.qkv_size();
        std::copy_n(&seq.q[(p - s.cached) * dims.q_size()], dims.q_size(), row);
        std::copy_n(&seq.k[p * slot_width], slot_width, row + dims.q_size());
        std::copy_n(&seq.v[p * slot_width], slot_width, row + dims.q_size() + slot_width);
        slots.push_back(static_cast<int32_t>(slot));
      }
    }
    cu.push_back(cu.back() + s.q_len);
    context_lens.push_back(context);
    max_q = std::max(max_q, s.q_len);
    max_k = std::max(max_k, context);
    max_table = std::max(max_table, static_cast<int>(table.size()));
    tables.push_back(std::move(table));
  }

  OwnedTensor cu_t = int_tensor(cu), context_t = int_tensor(context_lens);
  OwnedTensor slots_t = int_tensor(slots);
  OwnedTensor tables_t = int_matrix(tables, max_table + 1, -1);  // a spare -1 column
  AttentionMetadata metadata;
  metadata.num_seqs = static_cast<int>(c.seqs.size());
  metadata.max_seqlen_q = max_q;
  metadata.max_seqlen_k = max_k;
  metadata.cu_seqlens_q = cu_t.tensor;
  metadata.context_lens = context_t.tensor;
  metadata.block_tables = tables_t.tensor;
  metadata.slot_mapping = slots_t.tensor;
  const LayerKVCache cache{k_cache.tensor, v_cache.tensor};
  OwnedTensor out(DType::kF32, {total_rows, dims.q_size()});
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  backend.store_kv(qkv.tensor, cache, metadata, dims);
  backend.attention(qkv.tensor, cache, metadata, dims, static_cast<float>(scale), out.tensor);

  std::vector<double> expected(static_cast<size_t>(total_rows) * dims.q_size());
  for (size_t i = 0; i < c.seqs.size(); ++i) {
    for (int r = 0; r < c.seqs[i].q_len; ++r) {
      reference_row(&dense[i].q[r * dims.q_size()], dense[i], dims, c.seqs[i].cached + r, scale,
                    expected.data() + (cu[i] + r) * dims.q_size());
    }
  }
  test::expect_close(out.tensor, expected, 1e-4, 2e-5,
                     fmt::format("attention heads {} kv {} dim {} block {}", dims.num_heads,
                                 dims.num_kv_heads, d, bs));
}

const std::vector<SeqSpec> kMixedBatch = {
    {0, 17},   // prefill from scratch
    {20, 13},  // prefill after a cached prefix
    {39, 1},   // decode
    {5, 0},    // no rows this step
    {64, 30},  // a chunk in the middle of a long prompt
    {0, 1},    // one-token prompt
};

TEST(Attention, MixedBatchOverBlockSizesGroupsAndHeadDims) {
  std::mt19937 rng(40);
  auto backend = make_cpu_backend(3);
  for (int head_dim : {128, 64}) {
    for (int group : {1, 2, 4, 12}) {
      for (int block_size : {1, 3, 16, 256}) {
        run_case(*backend, {{2 * group, 2, head_dim}, block_size, kMixedBatch}, rng);
      }
    }
  }
}

TEST(Attention, DecodeWithManySequences) {
  std::mt19937 rng(41);
  auto backend = make_cpu_backend(2);
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 37; ++i) seqs.push_back({static_cast<int>(rng() % 300), 1});
  for (int block_size : {16, 256}) run_case(*backend, {{8, 2, 128}, block_size, seqs}, rng);
}

TEST(Attention, LongContextSpansSeveralLargeBlocks) {
  std::mt19937 rng(42);
  auto backend = make_cpu_backend(2);
  run_case(*backend, {{4, 2, 128}, 256, {{600, 3}, {511, 1}}}, rng);
  run_case(*backend, {{2, 1, 64}, 16, {{0, 300}}}, rng);
}

TEST(Attention, SingleThreadMatchesToo) {
  std::mt19937 rng(43);
  auto backend = make_cpu_backend(1);
  run_case(*backend, {{4, 2, 128}, 16, kMixedBatch}, rng);
}

// Valid metadata for one sequence of 3 new tokens in blocks {2, 0} of size 2.
struct SmallSetup {
  AttentionDims dims{2, 1, 4};
  OwnedTensor qkv{DType::kF32, {3, 16}};
  OwnedTensor k{DType::kF32, {3, 2, 1, 4}};
  OwnedTensor v{DType::kF32, {3, 2, 1, 4}};
  OwnedTensor out{DType::kF32, {3, 8}};
  OwnedTensor cu = int_tensor({0, 3});
  OwnedTensor context = int_tensor({3});
  OwnedTensor tables = int_matrix({{2, 0}}, 2, -1);
  OwnedTensor slots = int_tensor({4, 5, 0});
  AttentionMetadata metadata;

  SmallSetup() {
    std::fill_n(qkv.tensor.data_as<float>(), qkv.tensor.numel(), 0.5f);
    metadata.num_seqs = 1;
    metadata.max_seqlen_q = 3;
    metadata.max_seqlen_k = 3;
    metadata.cu_seqlens_q = cu.tensor;
    metadata.context_lens = context.tensor;
    metadata.block_tables = tables.tensor;
    metadata.slot_mapping = slots.tensor;
  }
  void run(Backend& backend) {
    backend.attention(qkv.tensor, {k.tensor, v.tensor}, metadata, dims, 0.5f, out.tensor);
  }
};

TEST(Attention, RejectsInconsistentMetadata) {
  auto backend = make_cpu_backend(1);
  {
    SmallSetup ok;
    backend->store_kv(ok.qkv.tensor, {ok.k.tensor, ok.v.tensor}, ok.metadata, ok.dims);
    EXPECT_NO_THROW(ok.run(*backend));
  }
  {
    SmallSetup s;
    s.tables.tensor.data_as<int32_t>()[1] = 3;  // block outside the cache
    EXPECT_THROW(s.run(*backend), Error);
  }
  {
    SmallSetup s;
    s.tables.tensor.data_as<int32_t>()[1] = -1;  // missing block for position 2
    EXPECT_THROW(s.run(*backend), Error);
  }
  {
    SmallSetup s;
    s.cu.tensor.data_as<int32_t>()[1] = 2;  // rows do not cover qkv
    EXPECT_THROW(s.run(*backend), Error);
  }
  {
    SmallSetup s;
    s.context.tensor.data_as<int32_t>()[0] = 2;  // fewer keys than query rows
    EXPECT_THROW(s.run(*backend), Error);
  }
  {
    SmallSetup s;
    s.context.tensor.data_as<int32_t>()[0] = 5;  // more keys than the block table holds
    EXPECT_THROW(s.run(*backend), Error);
  }
  {
    SmallSetup s;
    s.metadata.max_seqlen_q = 2;
    EXPECT_THROW(s.run(*backend), Error);
  }
  {
    SmallSetup s;
    s.dims = {3, 2, 4};  // 3 query heads cannot share 2 kv heads evenly
    EXPECT_THROW(s.run(*backend), Error);
  }
}

}  // namespace
}  // namespace nanovllm
