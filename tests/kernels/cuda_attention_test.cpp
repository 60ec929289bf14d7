// CUDA paged attention against the CPU op on the same inputs (rounded to the compute dtype):
// prefill batches mixing cached prefixes, chunked queries and single rows; decode batches with
// and without split-KV, padding rows (context 0) that must come out as zeros, and one launch
// re-run (eagerly and as a replayed CUDA graph) over new context lengths. Block tables are
// shuffled and every cache slot outside a sequence's context holds NaN, so a kernel that reads
// one fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "cuda_test_util.h"
#include "kernels/backend.h"
#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/attention_launch.cuh"
#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm {
namespace {

using test::DeviceTensor;
using test::download_floats;
using test::dtype_label;
using test::expect_relative_error;
using test::poison;
using test::random_floats;
using test::relative_tolerance;
using test::round_to;
using test::upload_floats;
using test::upload_ints;

constexpr DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};

// One attention call's inputs as host data, already rounded to the dtype under test.
struct Batch {
  AttentionDims dims;
  int block_size = 0;
  float scale = 0.0f;
  std::vector<int32_t> q_lens;    // query rows per sequence
  std::vector<int32_t> contexts;  // tokens in the cache per sequence; 0 = a padding row
  int num_blocks = 0;
  int table_width = 0;
  std::vector<int32_t> cu_seqlens_q;  // [num_seqs + 1]
  std::vector<int32_t> block_tables;  // [num_seqs, table_width], -1 past the end
  std::vector<float> qkv;             // [num_tokens, qkv_size]
  std::vector<float> k, v;            // [num_blocks, block_size, num_kv_heads, head_dim]

  int num_seqs() const { return static_cast<int>(q_lens.size()); }
  int num_tokens() const { return cu_seqlens_q.back(); }
  int max_q() const { return *std::max_element(q_lens.begin(), q_lens.end()); }
  int max_context() const { return *std::max_element(contexts.begin(), contexts.end()); }
};

struct Capacity {
  int num_blocks = 0;   // 0: just enough for the batch (plus spares)
  int table_width = 0;  // 0: the longest sequence's blocks plus a -1 column
};

// Random q/k/v, blocks drawn from a shuffled pool, NaN in every slot no sequence owns.
Batch make_batch(const AttentionDims& dims, int block_size, std::vector<int32_t> q_lens,
                 std::vector<int32_t> contexts, DType dtype, std::mt19937& rng,
                 Capacity capacity = {}) {
  Batch b;
  b.dims = dims;
  b.block_size = block_size;
  b.scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
  b.q_lens = std::move(q_lens);
  b.contexts = std::move(contexts);
  int total_blocks = 0;
  int widest = 0;
  for (int32_t context : b.contexts) {
    const int blocks = (context + block_size - 1) / block_size;
    total_blocks += blocks;
    widest = std::max(widest, blocks);
  }
  b.num_blocks = capacity.num_blocks > 0 ? capacity.num_blocks : total_blocks + 3;
  b.table_width = capacity.table_width > 0 ? capacity.table_width : widest + 1;
  EXPECT_GE(b.num_blocks, total_blocks);
  EXPECT_GE(b.table_width, widest);

  std::vector<int32_t> pool(b.num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  const int64_t slot_width = dims.kv_size();
  const size_t cache_elems = static_cast<size_t>(b.num_blocks) * block_size * slot_width;
  b.k = random_floats(cache_elems, rng);
  b.v = random_floats(cache_elems, rng);
  std::vector<bool> owned(static_cast<size_t>(b.num_blocks) * block_size, false);
  b.block_tables.assign(static_cast<size_t>(b.num_seqs()) * b.table_width, -1);
  b.cu_seqlens_q = {0};
  int next = 0;
  for (int s = 0; s < b.num_seqs(); ++s) {
    const int blocks = (b.contexts[s] + block_size - 1) / block_size;
    for (int i = 0; i < blocks; ++i) b.block_tables[s * b.table_width + i] = pool[next++];
    for (int p = 0; p < b.contexts[s]; ++p) {
      owned[b.block_tables[s * b.table_width + p / block_size] * block_size + p % block_size] =
          true;
    }
    b.cu_seqlens_q.push_back(b.cu_seqlens_q.back() + b.q_lens[s]);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t slot = 0; slot < owned.size(); ++slot) {
    if (owned[slot]) continue;
    std::fill_n(b.k.begin() + slot * slot_width, slot_width, nan);
    std::fill_n(b.v.begin() + slot * slot_width, slot_width, nan);
  }
  b.k = round_to(dtype, std::move(b.k));
  b.v = round_to(dtype, std::move(b.v));
  b.qkv = round_to(dtype, random_floats(static_cast<size_t>(b.num_tokens()) * dims.qkv_size(), rng,
                                        -2.0f, 2.0f));
  return b;
}

// Converts f32 host values to the dtype of `dst` and copies them in.
void upload_into(Backend& backend, const Tensor& dst, const std::vector<float>& values) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), dst.numel());
  if (dst.dtype() == DType::kF32) {
    backend.upload(dst, values.data());
    return;
  }
  std::vector<uint16_t> half(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    half[i] = dst.dtype() == DType::kBF16 ? float_to_bf16(values[i]) : float_to_fp16(values[i]);
  }
  backend.upload(dst, half.data());
}

// A batch's tensors on one backend, and the output; upload() refills them with another batch
// of the same shapes, as the inputs of a captured graph are refilled before each replay.
struct BatchTensors {
  DeviceTensor qkv, k, v, cu_seqlens_q, context_lens, block_tables, out;
  AttentionMetadata metadata;

  BatchTensors(Backend& backend, DType dtype, const Batch& b)
      : qkv(backend, dtype, {b.num_tokens(), b.dims.qkv_size()}),
        k(backend, dtype, {b.num_blocks, b.block_size, b.dims.num_kv_heads, b.dims.head_dim}),
        v(backend, dtype, {b.num_blocks, b.block_size, b.dims.num_kv_heads, b.dims.head_dim}),
        cu_seqlens_q(backend, DType::kI32, {b.num_seqs() + 1}),
        context_lens(backend, DType::kI32, {b.num_seqs()}),
        block_tables(backend, DType::kI32, {b.num_seqs(), b.table_width}),
        out(backend, dtype, {b.num_tokens(), b.dims.q_size()}) {
    metadata.num_seqs = b.num_seqs();
    metadata.max_seqlen_q = b.max_q();
    metadata.max_seqlen_k = b.max_context();
    metadata.cu_seqlens_q = cu_seqlens_q.tensor();
    metadata.context_lens = context_lens.tensor();
    metadata.block_tables = block_tables.tensor();
    upload(backend, b);
  }

  void upload(Backend& backend, const Batch& b) {
    upload_into(backend, qkv.tensor(), b.qkv);
    upload_into(backend, k.tensor(), b.k);
    upload_into(backend, v.tensor(), b.v);
    backend.upload(cu_seqlens_q.tensor(), b.cu_seqlens_q.data());
    backend.upload(context_lens.tensor(), b.contexts.data());
    backend.upload(block_tables.tensor(), b.block_tables.data());
  }

  // Only the op itself (no copies), so that it can be captured.
  void attention(Backend& backend, const Batch& b) {
    backend.attention(qkv.tensor(), {k.tensor(), v.tensor()}, metadata, b.dims, b.scale,
                      out.tensor());
  }

  void run(Backend& backend, const Batch& b) {
    poison(backend, out.tensor());
    attention(backend, b);
  }
};

Backend& cpu_backend() {
  static const std::unique_ptr<Backend> backend = make_cpu_backend();
  return *backend;
}

// The CPU op's output for the batch; padding sequences (context 0), which the CPU op rejects,
// are left out of its batch and expected as zero rows.
std::vector<float> cpu_reference(const Batch& b) {
  Batch kept = b;
  kept.q_lens.clear();
  kept.contexts.clear();
  kept.cu_seqlens_q = {0};
  kept.block_tables.clear();
  kept.qkv.clear();
  std::vector<int> kept_seqs;
  for (int s = 0; s < b.num_seqs(); ++s) {
    if (b.contexts[s] == 0) continue;
    kept_seqs.push_back(s);
    kept.q_lens.push_back(b.q_lens[s]);
    kept.contexts.push_back(b.contexts[s]);
    kept.cu_seqlens_q.push_back(kept.cu_seqlens_q.back() + b.q_lens[s]);
    kept.block_tables.insert(kept.block_tables.end(), b.block_tables.begin() + s * b.table_width,
                             b.block_tables.begin() + (s + 1) * b.table_width);
    kept.qkv.insert(kept.qkv.end(), b.qkv.begin() + int64_t{b.cu_seqlens_q[s]} * b.dims.qkv_size(),
                    b.qkv.begin() + int64_t{b.cu_seqlens_q[s + 1]} * b.dims.qkv_size());
  }
  const int64_t width = b.dims.q_size();
  std::vector<float> expected(static_cast<size_t>(b.num_tokens()) * width, 0.0f);
  if (kept_seqs.empty() || kept.num_tokens() == 0) return expected;

  Backend& cpu = cpu_backend();
  BatchTensors tensors(cpu, DType::kF32, kept);
  tensors.run(cpu, kept);
  const std::vector<float> got = download_floats(cpu, tensors.out.tensor());
  for (size_t i = 0; i < kept_seqs.size(); ++i) {
    const int s = kept_seqs[i];
    std::copy_n(got.begin() + int64_t{kept.cu_seqlens_q[i]} * width, b.q_lens[s] * width,
                expected.begin() + int64_t{b.cu_seqlens_q[s]} * width);
  }
  return expected;
}

std::string describe(const Batch& b, DType dtype) {
  return fmt::format("{} heads {}/{} dim {} block {} seqs {} max_q {} max_context {}",
                     dtype_label(dtype), b.dims.num_heads, b.dims.num_kv_heads, b.dims.head_dim,
                     b.block_size, b.num_seqs(), b.max_q(), b.max_context());
}

// Runs the batch on the CUDA backend and checks it against the CPU op; padding rows must be
// exactly zero.
void expect_matches_cpu(Backend& gpu, DType dtype, const Batch& b) {
  BatchTensors tensors(gpu, dtype, b);
  tensors.run(gpu, b);
  const std::vector<float> actual = download_floats(gpu, tensors.out.tensor());
  expect_relative_error(actual, cpu_reference(b), relative_tolerance(dtype), describe(b, dtype));
  const int64_t width = b.dims.q_size();
  for (int s = 0; s < b.num_seqs(); ++s) {
    if (b.contexts[s] != 0) continue;
    for (int64_t i = int64_t{b.cu_seqlens_q[s]} * width; i < b.cu_seqlens_q[s + 1] * width; ++i) {
      ASSERT_EQ(actual[i], 0.0f) << describe(b, dtype) << ": padding sequence " << s;
    }
  }
}

struct PrefillCase {
  AttentionDims dims;
  int block_size;
  std::vector<int32_t> cached;  // tokens already in the cache per sequence
  std::vector<int32_t> q_lens;  // query rows this step; context = cached + q_len
};

TEST(CudaAttention, PrefillMatchesCpu) {
  NVLLM_REQUIRE_CUDA();
  const std::vector<PrefillCase> cases = {
      // Qwen3-0.6B geometry: long prompt, cached prefixes, a decode row, a sequence with no rows.
      {{16, 8, 128}, 256, {0, 300, 0, 512, 0, 40}, {1000, 65, 1, 7, 63, 0}},
      // Group 8, head_dim 64, small blocks; chunked prefill starting mid-block.
      {{8, 1, 64}, 16, {0, 17, 1000, 3}, {300, 65, 1, 64}},
      // Group 1 and group 4.
      {{4, 4, 128}, 32, {0, 40, 129}, {7, 300, 2}},
      {{8, 2, 64}, 64, {100, 0, 5, 700}, {129, 64, 1, 33}},
      // Many query tiles a head, past a long cached prefix (Hopper: several work items a CTA).
      {{16, 8, 128}, 256, {0, 1500}, {1300, 400}},
      // Blocks of one 128-key tile; keys ending inside a tile, past a prefix that ends in one.
      {{8, 2, 128}, 128, {0, 129, 250}, {300, 70, 9}},
      {{32, 4, 128}, 16, {37}, {1000}},
  };
  std::mt19937 rng(7);
  for (DType dtype : kDtypes) {
    auto gpu = make_cuda_backend(dtype);
    for (const PrefillCase& c : cases) {
      std::vector<int32_t> contexts(c.cached.size());
      for (size_t i = 0; i < contexts.size(); ++i) contexts[i] = c.cached[i] + c.q_lens[i];
      expect_matches_cpu(*gpu, dtype,
                         make_batch(c.dims, c.block_size, c.q_lens, contexts, dtype, rng));
    }
  }
}

struct DecodeCase {
  AttentionDims dims;
  int block_size;
  std::vector<int32_t> contexts;  // 0 = a padding row
};

std::vector<int32_t> random_contexts(int count, int max_context, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(1, max_context);
  std::vector<int32_t> contexts(count);
  for (int32_t& c : contexts) c = dist(rng);
  return contexts;
}

// Every `every`-th context made 0: padding rows among real ones.
std::vector<int32_t> with_padding(std::vector<int32_t> contexts, int every) {
  for (size_t i = every - 1; i < contexts.size(); i += every) contexts[i] = 0;
  return contexts;
}

TEST(CudaAttention, DecodeMatchesCpu) {
  NVLLM_REQUIRE_CUDA();
  std::mt19937 rng(8);
  const std::vector<DecodeCase> cases = {
      // One long sequence: split-KV across the GPU.
      {{16, 8, 128}, 256, {3000}},
      // Many sequences: no split.
      {{4, 2, 128}, 16, random_contexts(70, 3000, rng)},
      {{16, 8, 128}, 256, random_contexts(40, 1200, rng)},
      // Group 8 with padding rows between real ones.
      {{8, 1, 64}, 32, {0, 1, 17, 0, 2500, 16, 0}},
      // Group 1, a few sequences (split), lengths at chunk and block edges.
      {{4, 4, 128}, 64, {1, 15, 16, 17, 63, 64, 65, 1000, 2047}},
      // Group 4, head_dim 64.
      {{16, 4, 64}, 256, random_contexts(33, 3000, rng)},
      // Group 2, a mid-size batch (split in two or three).
      {{4, 2, 128}, 32, random_contexts(20, 1500, rng)},
      // More pairs than CTAs stay resident (several waves, as bench.py's batches run): group 4
      // as Qwen3-8B, group 7 as Qwen2.5-7B with padding rows among the sequences.
      {{32, 8, 128}, 256, random_contexts(300, 400, rng)},
      {{28, 4, 128}, 16, with_padding(random_contexts(250, 500, rng), 7)},
  };
  for (DType dtype : kDtypes) {
    auto gpu = make_cuda_backend(dtype);
    for (const DecodeCase& c : cases) {
      const std::vector<int32_t> q_lens(c.contexts.size(), 1);
      expect_matches_cpu(*gpu, dtype,
                         make_batch(c.dims, c.block_size, q_lens, c.contexts, dtype, rng));
    }
  }
}

// The decode launcher with the split count forced (what attention_bench --splits sweeps): every
// count from 1 to 8 matches the CPU op, padding rows stay zero, and a count outside is an error.
TEST(CudaAttention, DecodeWithEveryForcedSplitCountMatchesCpu) {
  NVLLM_REQUIRE_CUDA();
  std::mt19937 rng(21);
  const AttentionDims dims{28, 4, 128};
  const std::vector<int32_t> contexts = {1500, 100, 0, 17, 1};
  int device = 0, num_sms = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&device));
  NVLLM_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    auto gpu = make_cuda_backend(dtype);
    const Batch b =
        make_batch(dims, 64, std::vector<int32_t>(contexts.size(), 1), contexts, dtype, rng);
    BatchTensors t(*gpu, dtype, b);
    const std::vector<float> expected = cpu_reference(b);
    cuda::PagedAttentionArgs args;
    args.dtype = dtype;
    args.qkv = t.qkv.tensor().data();
    args.qkv_row_stride = dims.qkv_size();
    args.k_cache = t.k.tensor().data();
    args.v_cache = t.v.tensor().data();
    args.num_blocks = b.num_blocks;
    args.out = t.out.tensor().data();
    args.out_row_stride = dims.q_size();
    args.cu_seqlens_q = t.cu_seqlens_q.tensor().data_as<int32_t>();
    args.context_lens = t.context_lens.tensor().data_as<int32_t>();
    args.block_tables = t.block_tables.tensor().data_as<int32_t>();
    args.block_table_stride = b.table_width;
    args.num_seqs = b.num_seqs();
    args.num_tokens = b.num_tokens();
    args.max_seqlen_q = 1;
    args.max_seqlen_k = b.max_context();
    args.num_heads = dims.num_heads;
    args.num_kv_heads = dims.num_kv_heads;
    args.head_dim = dims.head_dim;
    args.block_size = b.block_size;
    args.scale = b.scale;
    args.num_sms = num_sms;
    cuda::check_paged_attention(args);
    for (int splits = 1; splits <= 8; ++splits) {
      poison(*gpu, t.out.tensor());
      gpu->synchronize();  // the uploads and the poison, on the backend's stream
      cuda::attention::launch_attention_decode(args, splits, nullptr);
      NVLLM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
      const std::vector<float> actual = download_floats(*gpu, t.out.tensor());
      const std::string what = fmt::format("{} split {} ways", describe(b, dtype), splits);
      expect_relative_error(actual, expected, relative_tolerance(dtype), what);
      for (int64_t i = 2 * dims.q_size(); i < 3 * dims.q_size(); ++i) {
        ASSERT_EQ(actual[i], 0.0f) << what << ": the padding row";
      }
    }
    EXPECT_THROW(cuda::attention::launch_attention_decode(args, 0, nullptr), Error);
    EXPECT_THROW(cuda::attention::launch_attention_decode(args, 9, nullptr), Error);
  }
}

// The order the sequences' CTAs are dispatched in (AttentionMetadata::seq_order) changes no
// output bit, split or not.
TEST(CudaAttention, DecodeOutputDoesNotDependOnTheDispatchOrder) {
  NVLLM_REQUIRE_CUDA();
  std::mt19937 rng(12);
  const std::vector<DecodeCase> cases = {
      {{16, 8, 128}, 256, random_contexts(40, 1200, rng)},  // no split
      {{4, 4, 128}, 64, {1, 15, 16, 17, 0, 1000, 2047}},    // split, with a padding row
      {{28, 4, 128}, 64, random_contexts(300, 300, rng)},   // several waves of CTAs
  };
  for (DType dtype : kDtypes) {
    auto gpu = make_cuda_backend(dtype);
    for (const DecodeCase& c : cases) {
      const std::vector<int32_t> q_lens(c.contexts.size(), 1);
      const Batch b = make_batch(c.dims, c.block_size, q_lens, c.contexts, dtype, rng);
      BatchTensors in_order(*gpu, dtype, b), reordered(*gpu, dtype, b);
      in_order.run(*gpu, b);
      std::vector<int32_t> order(c.contexts.size());
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      DeviceTensor order_d = upload_ints(*gpu, {static_cast<int64_t>(order.size())}, order);
      reordered.metadata.seq_order = order_d.tensor();
      reordered.run(*gpu, b);
      EXPECT_EQ(download_floats(*gpu, reordered.out.tensor()),
                download_floats(*gpu, in_order.out.tensor()))
          << describe(b, dtype);
    }
  }
}

// What a replayed decode graph does: the same launch (same batch size and tensors) over new
// context lengths, block tables and queries, including lengths far shorter and far longer than
// the first run's and padding rows.
TEST(CudaAttention, DecodeReusesLaunchForNewContextLengths) {
  NVLLM_REQUIRE_CUDA();
  const AttentionDims dims{16, 8, 128};
  const int block_size = 16;
  const int max_context = 3200;
  const Capacity capacity{400, max_context / block_size};  // every round's blocks fit
  const std::vector<std::vector<int32_t>> rounds = {
      {2000, 5, 700, 0, 1, 3000},
      {17, 3100, 0, 1, 2999, 64},
      {1, 1, 1, 1, 1, 1},
  };
  const std::vector<int32_t> q_lens(6, 1);
  for (DType dtype : kDtypes) {
    std::mt19937 rng(9);
    auto gpu = make_cuda_backend(dtype);
    const Batch first = make_batch(dims, block_size, q_lens, rounds[0], dtype, rng, capacity);
    BatchTensors tensors(*gpu, dtype, first);
    tensors.metadata.max_seqlen_k = max_context;  // what a captured batch is planned with
    tensors.run(*gpu, first);                     // eagerly first, as the engine does
    expect_relative_error(download_floats(*gpu, tensors.out.tensor()), cpu_reference(first),
                          relative_tolerance(dtype), "first run " + describe(first, dtype));

    // The same tensors and launch, eagerly, over each later round's lengths.
    for (size_t r = 1; r < rounds.size(); ++r) {
      const Batch next = make_batch(dims, block_size, q_lens, rounds[r], dtype, rng, capacity);
      tensors.upload(*gpu, next);
      tensors.run(*gpu, next);
      expect_relative_error(download_floats(*gpu, tensors.out.tensor()), cpu_reference(next),
                            relative_tolerance(dtype), "eager rerun " + describe(next, dtype));
    }

    // Captured once over the first round, replayed over the others.
    tensors.upload(*gpu, first);
    const std::unique_ptr<CapturedGraph> graph =
        gpu->capture([&] { tensors.attention(*gpu, first); });
    ASSERT_NE(graph, nullptr) << "the CUDA backend must support graph capture";
    for (size_t r = 1; r < rounds.size(); ++r) {
      const Batch next = make_batch(dims, block_size, q_lens, rounds[r], dtype, rng, capacity);
      tensors.upload(*gpu, next);
      poison(*gpu, tensors.out.tensor());
      graph->replay();
      gpu->synchronize();
      const std::vector<float> actual = download_floats(*gpu, tensors.out.tensor());
      expect_relative_error(actual, cpu_reference(next), relative_tolerance(dtype),
                            "graph replay " + describe(next, dtype));
      const int64_t width = dims.q_size();
      for (int s = 0; s < next.num_seqs(); ++s) {
        if (next.contexts[s] != 0) continue;
        for (int64_t i = s * width; i < (s + 1) * width; ++i) {
          ASSERT_EQ(actual[i], 0.0f) << "graph replay: padding sequence " << s;
        }
      }
    }
  }
}

// Float vectors equal bit for bit (NaN slots of the caches included).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The inputs qk_norm_rope needs beside a decode batch, one per query row: this step's token
// sits at position context - 1 and is stored at that position's slot (-1 for padding rows and
// for sequence 1's row, whose store is skipped).
struct QkNormInputs {
  static constexpr int kMaxPositions = 4096;
  DeviceTensor q_norm, k_norm, cos_sin, positions, slots;
  bool with_norm = true;  // false: rotary only (Llama, Qwen2)

  Tensor q_weight() { return with_norm ? q_norm.tensor() : Tensor(); }
  Tensor k_weight() { return with_norm ? k_norm.tensor() : Tensor(); }

  QkNormInputs(Backend& gpu, DType dtype, const Batch& b, std::mt19937& rng)
      : q_norm(upload_floats(gpu, dtype, {b.dims.head_dim},
                             random_floats(b.dims.head_dim, rng, 0.5f, 1.5f))),
        k_norm(upload_floats(gpu, dtype, {b.dims.head_dim},
                             random_floats(b.dims.head_dim, rng, 0.5f, 1.5f))),
        cos_sin(upload_floats(gpu, DType::kF32, {kMaxPositions, b.dims.head_dim},
                              test::rotary_table(kMaxPositions, b.dims.head_dim))),
        positions(gpu, DType::kI32, {b.num_tokens()}),
        slots(gpu, DType::kI32, {b.num_tokens()}) {
    upload(gpu, b);
  }

  void upload(Backend& gpu, const Batch& b) {
    std::vector<int32_t> host_positions(b.num_tokens()), host_slots(b.num_tokens(), -1);
    for (int s = 0; s < b.num_seqs(); ++s) {
      if (b.q_lens[s] == 0) continue;
      const int row = b.cu_seqlens_q[s];
      const int32_t p = b.contexts[s] - 1;
      host_positions[row] = std::max(p, 0);
      if (p < 0 || s == 1) continue;
      host_slots[row] =
          b.block_tables[s * b.table_width + p / b.block_size] * b.block_size + p % b.block_size;
    }
    gpu.upload(positions.tensor(), host_positions.data());
    gpu.upload(slots.tensor(), host_slots.data());
  }

  void separate(Backend& gpu, BatchTensors& t, const Batch& b) {
    AttentionMetadata metadata = t.metadata;
    metadata.slot_mapping = slots.tensor();
    gpu.qk_norm_rope_store_kv(t.qkv.tensor(), q_weight(), k_weight(), positions.tensor(),
                              cos_sin.tensor(), 1e-6f, b.dims, {t.k.tensor(), t.v.tensor()},
                              metadata);
    gpu.attention(t.qkv.tensor(), {t.k.tensor(), t.v.tensor()}, metadata, b.dims, b.scale,
                  t.out.tensor());
  }

  void fused(Backend& gpu, BatchTensors& t, const Batch& b) {
    AttentionMetadata metadata = t.metadata;
    metadata.slot_mapping = slots.tensor();
    gpu.qk_norm_rope_attention(t.qkv.tensor(), q_weight(), k_weight(), positions.tensor(),
                               cos_sin.tensor(), 1e-6f, b.dims, {t.k.tensor(), t.v.tensor()},
                               metadata, b.scale, t.out.tensor());
  }
};

void expect_same_output_and_cache(Backend& gpu, BatchTensors& fused, BatchTensors& separate,
                                  const std::string& what) {
  EXPECT_TRUE(same_bits(download_floats(gpu, fused.out.tensor()),
                        download_floats(gpu, separate.out.tensor())))
      << what << ": output";
  EXPECT_TRUE(
      same_bits(download_floats(gpu, fused.k.tensor()), download_floats(gpu, separate.k.tensor())))
      << what << ": k cache";
  EXPECT_TRUE(
      same_bits(download_floats(gpu, fused.v.tensor()), download_floats(gpu, separate.v.tensor())))
      << what << ": v cache";
}

// qk_norm_rope_attention (one decode kernel in bf16/f16, the two ops in f32) against
// qk_norm_rope_store_kv then attention on the same inputs: the same output and caches, bit for
// bit, with this step's key at chunk and block edges, padding rows, a skipped store, sequences
// without a query row, with and without split-KV; then captured once and replayed over new
// lengths.
TEST(CudaAttention, DecodeWithFusedQkNormEqualsTheSeparateOps) {
  NVLLM_REQUIRE_CUDA();
  std::mt19937 rng(10);
  const std::vector<DecodeCase> cases = {
      {{16, 8, 128}, 256, {700}},
      {{16, 8, 128}, 16, {1, 16, 17, 32, 33, 255, 256, 257, 0, 3000}},
      {{8, 1, 64}, 32, {0, 1, 17, 2500, 16}},
      {{4, 4, 128}, 64, random_contexts(70, 2000, rng)},
      {{16, 4, 64}, 256, random_contexts(5, 3000, rng)},
  };
  for (DType dtype : kDtypes) {
    auto gpu = make_cuda_backend(dtype);
    for (const DecodeCase& c : cases) {
      const std::vector<int32_t> q_lens(c.contexts.size(), 1);
      const Batch b = make_batch(c.dims, c.block_size, q_lens, c.contexts, dtype, rng);
      QkNormInputs inputs(*gpu, dtype, b, rng);
      BatchTensors separate(*gpu, dtype, b), fused(*gpu, dtype, b);
      inputs.separate(*gpu, separate, b);
      poison(*gpu, fused.out.tensor());
      inputs.fused(*gpu, fused, b);
      expect_same_output_and_cache(*gpu, fused, separate, describe(b, dtype));
    }

    // Without a q/k norm (rotary only), as Llama and Qwen2 run.
    for (const DecodeCase& c : {cases[1], cases[2]}) {
      const std::vector<int32_t> q_lens(c.contexts.size(), 1);
      const Batch b = make_batch(c.dims, c.block_size, q_lens, c.contexts, dtype, rng);
      QkNormInputs inputs(*gpu, dtype, b, rng);
      inputs.with_norm = false;
      BatchTensors separate(*gpu, dtype, b), fused(*gpu, dtype, b);
      inputs.separate(*gpu, separate, b);
      poison(*gpu, fused.out.tensor());
      inputs.fused(*gpu, fused, b);
      expect_same_output_and_cache(*gpu, fused, separate, "no q/k norm " + describe(b, dtype));
    }

    // Sequences without a query row this step: the later rows sit at other indices than their
    // sequences, which the kernel's early metadata reads guess otherwise.
    {
      const Batch b =
          make_batch({16, 8, 128}, 16, {1, 0, 1, 0, 1}, {40, 300, 700, 5, 1000}, dtype, rng);
      QkNormInputs inputs(*gpu, dtype, b, rng);
      BatchTensors separate(*gpu, dtype, b), fused(*gpu, dtype, b);
      inputs.separate(*gpu, separate, b);
      poison(*gpu, fused.out.tensor());
      inputs.fused(*gpu, fused, b);
      expect_same_output_and_cache(*gpu, fused, separate, "rows apart from their sequences");
    }
    // The same over several waves of CTAs: the rows sit far from their sequences' indices.
    {
      std::vector<int32_t> q_lens(300, 1);
      for (size_t i = 1; i < q_lens.size(); i += 3) q_lens[i] = 0;
      const Batch b =
          make_batch({32, 8, 128}, 16, q_lens, random_contexts(300, 300, rng), dtype, rng);
      QkNormInputs inputs(*gpu, dtype, b, rng);
      BatchTensors separate(*gpu, dtype, b), fused(*gpu, dtype, b);
      inputs.separate(*gpu, separate, b);
      poison(*gpu, fused.out.tensor());
      inputs.fused(*gpu, fused, b);
      expect_same_output_and_cache(*gpu, fused, separate,
                                   "rows apart from their sequences, several waves of CTAs");
    }

    const AttentionDims dims{16, 8, 128};
    const Capacity capacity{400, 200};
    const std::vector<int32_t> q_lens(4, 1);
    const Batch first = make_batch(dims, 16, q_lens, {900, 0, 33, 2}, dtype, rng, capacity);
    const Batch next = make_batch(dims, 16, q_lens, {3100, 17, 1, 0}, dtype, rng, capacity);
    QkNormInputs inputs(*gpu, dtype, first, rng);
    BatchTensors separate(*gpu, dtype, first), fused(*gpu, dtype, first);
    inputs.fused(*gpu, fused, first);  // eagerly first, as the engine does
    const std::unique_ptr<CapturedGraph> graph =
        gpu->capture([&] { inputs.fused(*gpu, fused, first); });
    ASSERT_NE(graph, nullptr);
    inputs.upload(*gpu, next);
    separate.upload(*gpu, next);
    fused.upload(*gpu, next);
    inputs.separate(*gpu, separate, next);
    poison(*gpu, fused.out.tensor());
    graph->replay();
    gpu->synchronize();
    expect_same_output_and_cache(*gpu, fused, separate, "graph replay " + describe(next, dtype));
  }
}

// The kernels' coverage is checked on the host, before any launch.
TEST(CudaAttentionSupport, RejectsGeometryTheKernelsDoNotCover) {
  using cuda::check_attention_support;
  EXPECT_NO_THROW(check_attention_support(128, 256, 16, 8, DType::kBF16));
  EXPECT_NO_THROW(check_attention_support(64, 16, 8, 1, DType::kF16));
  EXPECT_NO_THROW(check_attention_support(128, 32, 4, 4, DType::kF32));
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { check_attention_support(96, 256, 16, 8, DType::kBF16); }).find("96"),
            std::string::npos);
  EXPECT_NE(message([] { check_attention_support(128, 24, 16, 8, DType::kBF16); }).find("24"),
            std::string::npos);
  EXPECT_NE(message([] { check_attention_support(128, 512, 16, 8, DType::kBF16); }).find("512"),
            std::string::npos);
  EXPECT_NE(message([] { check_attention_support(128, 8, 16, 8, DType::kBF16); }).find("8"),
            std::string::npos);
  EXPECT_NE(message([] { check_attention_support(128, 256, 32, 2, DType::kBF16); }).find("16"),
            std::string::npos);
  EXPECT_NE(message([] { check_attention_support(128, 256, 12, 8, DType::kBF16); }).find("12"),
            std::string::npos);
  EXPECT_NE(message([] { check_attention_support(128, 256, 16, 8, DType::kI32); }).find("int32"),
            std::string::npos);
}

// A decode launch splits the keys while there are fewer (sequence, kv head) pairs than its
// target of CTAs (1.5 an SM for contexts of at most 4,096 keys, 3 beyond), into at most a
// cluster's 8 CTAs (6 once there are more than an SM's worth), by the batch size and the bound on
// the contexts alone (a captured launch serves any context lengths).
TEST(CudaAttentionSupport, DecodeSplitsDependOnBatchSizeAndContextBound) {
  cuda::PagedAttentionArgs args;
  args.dtype = DType::kBF16;
  args.num_heads = 16;
  args.num_kv_heads = 8;
  args.head_dim = 128;
  args.block_size = 256;
  args.max_seqlen_q = 1;
  args.num_sms = 132;
  const auto splits = [&](int seqs, int max_context) {
    args.num_seqs = seqs;
    args.max_seqlen_k = max_context;
    return cuda::attention::decode_num_splits(args);
  };
  for (int max_context : {0, 4096, 4097, 32768}) {
    int previous = 8;
    for (int seqs : {1, 2, 4, 8, 16, 17, 32, 64, 256}) {
      const int now = splits(seqs, max_context);
      EXPECT_GE(now, 1);
      EXPECT_LE(now, previous) << seqs << " sequences: fewer CTAs need no more splits";
      EXPECT_LE(now, splits(seqs, 32768)) << seqs << " sequences: short contexts, no more splits";
      previous = now;
    }
  }
  EXPECT_EQ(splits(1, 4096), 8);
  EXPECT_EQ(splits(1, 32768), 8);
  EXPECT_EQ(splits(4, 4096), 6);  // 32 pairs: 8 would make 256 CTAs in clusters of 8
  EXPECT_EQ(splits(8, 4096), 3);  // 192 CTAs
  EXPECT_EQ(splits(8, 32768), 6);
  // 32 long prompts fill the SMs once, unevenly: their keys are still split; short ones not.
  EXPECT_EQ(splits(32, 32768), 2);
  EXPECT_EQ(splits(32, 0), 2);  // an unknown bound counts as long
  EXPECT_EQ(splits(32, 4096), 1);
  EXPECT_EQ(splits(256, 32768), 1);
  args.num_kv_heads = 4;  // Qwen2.5-7B, Qwen3-30B-A3B
  EXPECT_EQ(splits(16, 4096), 3);
  EXPECT_EQ(splits(32, 4096), 2);
  EXPECT_EQ(splits(48, 4096), 1);
}

}  // namespace
}  // namespace nanovllm
