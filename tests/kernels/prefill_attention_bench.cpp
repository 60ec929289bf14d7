// Causal prefill attention as the engine runs it on a long prompt: one sequence of N tokens
// (4k, 16k, 32k) whose K/V are already in the paged cache (block size 256, blocks scattered),
// 16 query and 8 KV heads, head_dim 128, bf16: the Hopper kernels the engine takes on sm_90
// (hopper_prefill.h) and the portable tensor-core kernel. Prints microseconds and TFLOP/s
// counted as FlashAttention counts a causal pass (4 N^2 heads head_dim / 2), for
// tools/fa3_attention_bench.py to set FlashAttention-3 beside on the same shapes.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_bench_util.h"
#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/hopper_prefill.h"

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
  return 0;
}

}  // namespace
}  // namespace nanovllm

int main() {
  return nanovllm::bench::bench_main("prefill_attention_bench", nanovllm::run);
}
