// Causal prefill attention as the engine runs it on a long prompt: one sequence of N tokens
// (4k, 16k, 32k) whose K/V are already in the paged cache (block size 256, blocks scattered),
// 16 query and 8 KV heads, head_dim 128, bf16: the Hopper kernels the engine takes on sm_90
// (hopper_prefill.h) and the portable tensor-core kernel. Prints microseconds and TFLOP/s
// counted as FlashAttention counts a causal pass (4 N^2 heads head_dim / 2), for
// tools/fa3_attention_bench.py to set FlashAttention-3 beside on the same shapes. Then the op
// before it, qk_norm_rope storing K/V into the cache, against the copy bandwidth.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "cuda_bench_util.h"
#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/hopper_prefill.h"
#include "kernels/cuda/elementwise/elementwise.h"

namespace nanovllm {
namespace {

using namespace bench;

constexpr int kBlock = 256;
constexpr int kHeads = 16;
constexpr int kKvHeads = 8;
constexpr int kDim = 128;

struct Timings {
  double hopper_ms = 0;  // 0: not on this build or device
  double portable_ms = 0;
};

Timings bench_prefill(int tokens, const cudaDeviceProp& properties, cudaStream_t stream,
                      std::mt19937& rng) {
  const int blocks = (tokens + kBlock - 1) / kBlock;
  const size_t cache_bytes = size_t{2} * blocks * kBlock * kKvHeads * kDim;  // one of K, V
  DeviceBuffer k_cache(cache_bytes), v_cache(cache_bytes);
  fill_random_bf16(k_cache.get(), cache_bytes, rng);
  fill_random_bf16(v_cache.get(), cache_bytes, rng);
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const std::vector<int32_t> cu = {0, tokens};
  const std::vector<int32_t> context = {tokens};
  DeviceBuffer table_d(table.size() * 4), cu_d(cu.size() * 4), context_d(4);
  NVLLM_CUDA_CHECK(
      cudaMemcpy(table_d.get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  NVLLM_CUDA_CHECK(cudaMemcpy(cu_d.get(), cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
  NVLLM_CUDA_CHECK(cudaMemcpy(context_d.get(), context.data(), 4, cudaMemcpyHostToDevice));
  const int qkv_width = (kHeads + 2 * kKvHeads) * kDim;
  DeviceBuffer qkv(size_t{2} * tokens * qkv_width), out(size_t{2} * tokens * kHeads * kDim);
  fill_random_bf16(qkv.get(), qkv.bytes(), rng);

  cuda::PagedAttentionArgs args;
  args.dtype = DType::kBF16;
  args.qkv = qkv.get();
  args.qkv_row_stride = qkv_width;
  args.k_cache = k_cache.get();
  args.v_cache = v_cache.get();
  args.num_blocks = blocks;
  args.out = out.get();
  args.out_row_stride = kHeads * kDim;
  args.cu_seqlens_q = cu_d.get<int32_t>();
  args.context_lens = context_d.get<int32_t>();
  args.block_tables = table_d.get<int32_t>();
  args.block_table_stride = blocks;
  args.num_seqs = 1;
  args.num_tokens = tokens;
  args.max_seqlen_q = tokens;
  args.num_heads = kHeads;
  args.num_kv_heads = kKvHeads;
  args.head_dim = kDim;
  args.block_size = kBlock;
  args.scale = 0.08838834764831845f;
  args.num_sms = properties.multiProcessorCount;
  Timings timings;
#ifdef NANOVLLM_HOPPER_PREFILL
  if (cuda::HopperPrefillAttention::supports(args, properties.major * 10 + properties.minor)) {
    cuda::HopperPrefillAttention hopper;
    timings.hopper_ms = time_ms(stream, kTimedRuns, [&] {
      NVLLM_CHECK(hopper.run(args, cu.data(), context.data(), stream));
    });
  }
#endif
  timings.portable_ms = time_ms(stream, kTimedRuns, [&] { cuda::paged_attention(args, stream); });
  return timings;
}

// Milliseconds of qk_norm_rope over `tokens` rows of qkv with the K/V store (the engine's
// prefill), and the bytes it must move: qkv read, q and k written back, K and V and the rotary
// table rows written and read once.
std::pair<double, double> bench_qk_norm_rope(int tokens, cudaStream_t stream, std::mt19937& rng) {
  const int qkv_width = (kHeads + 2 * kKvHeads) * kDim;
  DeviceBuffer qkv(size_t{2} * tokens * qkv_width), norm(size_t{2} * kDim);
  DeviceBuffer k_cache(size_t{2} * tokens * kKvHeads * kDim), v_cache(k_cache.bytes());
  DeviceBuffer table(size_t{4} * tokens * kDim), positions(size_t{4} * tokens),
      slots(size_t{4} * tokens);
  fill_random_bf16(qkv.get(), qkv.bytes(), rng);
  fill_random_bf16(norm.get(), norm.bytes(), rng);
  NVLLM_CUDA_CHECK(cudaMemset(table.get(), 0, table.bytes()));
  std::vector<int32_t> rows(tokens);
  std::iota(rows.begin(), rows.end(), 0);
  NVLLM_CUDA_CHECK(
      cudaMemcpy(positions.get(), rows.data(), rows.size() * 4, cudaMemcpyHostToDevice));
  std::shuffle(rows.begin(), rows.end(), rng);
  NVLLM_CUDA_CHECK(cudaMemcpy(slots.get(), rows.data(), rows.size() * 4, cudaMemcpyHostToDevice));
  cuda::QkNormRopeArgs args;
  args.qkv = qkv.get();
  args.qkv_stride = qkv_width;
  args.tokens = tokens;
  args.num_heads = kHeads;
  args.num_kv_heads = kKvHeads;
  args.head_dim = kDim;
  args.q_norm = args.k_norm = norm.get();
  args.positions = positions.get<int32_t>();
  args.cos_sin = table.get<float>();
  args.max_positions = tokens;
  args.slot_mapping = slots.get<int32_t>();
  args.num_slots = tokens;
  args.k_cache = k_cache.get();
  args.v_cache = v_cache.get();
  const double ms = time_ms(stream, kTimedRuns, [&] { cuda::qk_norm_rope(args, stream); });
  const double bytes = 2.0 * tokens * (qkv_width + (kHeads + kKvHeads) * kDim) + k_cache.bytes() +
                       v_cache.bytes() + table.bytes();
  return {ms, bytes};
}

int run(cudaStream_t stream, const cudaDeviceProp& properties) {
  std::mt19937 rng(2);
  fmt::print(
      "prefill attention, causal, {} heads, {} kv heads, head_dim {}, bf16, paged "
      "(block {}), on {}\n",
      kHeads, kKvHeads, kDim, kBlock, properties.name);
  for (int tokens : {4096, 16384, 32768}) {
    const Timings timings = bench_prefill(tokens, properties, stream, rng);
    const double flops = 4.0 * tokens * tokens * kHeads * kDim / 2.0;
    const auto print = [&](const char* kernel, double ms) {
      if (ms == 0) return;
      fmt::print("  {:<8} N {:>5}: {:>9.1f} us  {:>6.1f} TFLOP/s\n", kernel, tokens, ms * 1e3,
                 flops / (ms * 1e-3) / 1e12);
    };
    print("hopper", timings.hopper_ms);
    print("portable", timings.portable_ms);
    std::fflush(stdout);
  }
  const double bandwidth = copy_bandwidth(stream);
  for (int tokens : {4096, 16384}) {
    const auto [ms, bytes] = bench_qk_norm_rope(tokens, stream, rng);
    fmt::print(
        "qk_norm_rope with the K/V store, N {:>5}: {:>7.1f} us, {:>5.0f} GB/s, {:.0f}% of the "
        "copy bandwidth ({:.0f} GB/s)\n",
        tokens, ms * 1e3, bytes / (ms * 1e-3) / 1e9, 100 * bytes / (ms * 1e-3) / 1e9 / bandwidth,
        bandwidth);
  }
  return 0;
}

}  // namespace
}  // namespace nanovllm

int main() {
  return nanovllm::bench::bench_main("prefill_attention_bench", nanovllm::run);
}
