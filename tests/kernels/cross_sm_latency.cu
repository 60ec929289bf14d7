#include "cross_sm_latency.h"

#include <cstdint>

#include "kernels/cuda/cuda_check.h"

namespace nanovllm::bench {
namespace {

__device__ uint64_t global_ns() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

// CTAs 0 and 1 pass a counter back and forth `rounds` times through relaxed gpu-scope stores
// and loads, as the fused kernel's tagged words travel.
__global__ void ping_pong(uint64_t* words, int rounds, double* result) {
  uint64_t* mine = words + 32 * blockIdx.x;  // a 256-byte line each
  const uint64_t* theirs = words + 32 * (1 - blockIdx.x);
  const uint64_t start_ns = global_ns();
  const long long start_clock = clock64();
  for (uint64_t r = 1; r <= static_cast<uint64_t>(rounds); ++r) {
    if (blockIdx.x == 0) {
      asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(mine), "l"(r) : "memory");
    }
    uint64_t value = 0;
    do {
      asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(value) : "l"(theirs) : "memory");
    } while (value != r);
    if (blockIdx.x == 1) {
      asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(mine), "l"(r) : "memory");
    }
  }
  if (blockIdx.x == 0) {
    const double ns = static_cast<double>(global_ns() - start_ns);
    result[0] = ns / rounds;
    result[1] = static_cast<double>(clock64() - start_clock) / ns;
  }
}

}  // namespace

CrossSmLatency cross_sm_latency(cudaStream_t stream) {
  constexpr int kRounds = 20000;
  uint64_t* words = nullptr;
  double* result = nullptr;
  NVLLM_CUDA_CHECK(cudaMalloc(&words, 64 * sizeof(uint64_t)));
  NVLLM_CUDA_CHECK(cudaMalloc(&result, 2 * sizeof(double)));
  NVLLM_CUDA_CHECK(cudaMemsetAsync(words, 0, 64 * sizeof(uint64_t), stream));
  // One thread per CTA; both CTAs resident at once (two of many SMs).
  ping_pong<<<2, 1, 0, stream>>>(words, kRounds, result);
  NVLLM_CUDA_CHECK(cudaGetLastError());
  double host[2] = {};
  NVLLM_CUDA_CHECK(cudaMemcpyAsync(host, result, sizeof(host), cudaMemcpyDeviceToHost, stream));
  NVLLM_CUDA_CHECK(cudaStreamSynchronize(stream));
  NVLLM_CUDA_CHECK(cudaFree(words));
  NVLLM_CUDA_CHECK(cudaFree(result));
  return {host[0], host[1]};
}

}  // namespace nanovllm::bench
