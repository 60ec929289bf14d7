// Warp and block sums (and a warp max) for the row-wise kernels (fixed summation order:
// results are deterministic from run to run).
#pragma once

#include <cuda_runtime.h>

namespace nanovllm::cuda {

// Sum over the 32 lanes of a warp, returned to every lane; all lanes must call it.
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Max over the 32 lanes of a warp, returned to every lane; all lanes must call it.
__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// Sum over the block, returned to every thread. blockDim.x must be a multiple of 32 (at most
// 1024) and every thread must call it; it may be called again afterwards.
__device__ __forceinline__ float block_sum(float value) {
  __shared__ float warp_sums[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  value = warp_sum(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  float total = 0.0f;
  const int warps = blockDim.x / 32;
  for (int w = 0; w < warps; ++w) total += warp_sums[w];
  __syncthreads();  // every thread has read warp_sums before a later call rewrites it
  return total;
}

}  // namespace nanovllm::cuda
