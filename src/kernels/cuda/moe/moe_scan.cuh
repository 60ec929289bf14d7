// A CTA-wide exclusive prefix sum in shared memory, for moe_align and for the decode GEMMs
// that work out their tiles themselves.
#pragma once

namespace nanovllm::cuda::moe {

// Exclusive prefix sums of values[0, n) in shared memory, in place, by the whole CTA (every
// thread calls it); returns the total. warp_sums: 32 ints of shared memory.
__device__ inline int block_exclusive_scan(int* values, int n, int* warp_sums) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  int carry = 0;
  for (int base = 0; base < n; base += static_cast<int>(blockDim.x)) {
    const int i = base + static_cast<int>(threadIdx.x);
    const int value = i < n ? values[i] : 0;
    int inclusive = value;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const int other = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += other;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
      int sum = lane < warps ? warp_sums[lane] : 0;
#pragma unroll
      for (int offset = 1; offset < 32; offset *= 2) {
        const int other = __shfl_up_sync(0xffffffffu, sum, offset);
        if (lane >= offset) sum += other;
      }
      warp_sums[lane] = sum;  // inclusive over warps
    }
    __syncthreads();
    if (i < n) values[i] = carry + (warp > 0 ? warp_sums[warp - 1] : 0) + inclusive - value;
    carry += warp_sums[warps - 1];
    __syncthreads();  // warp_sums is rewritten by the next round
  }
  return carry;
}

}  // namespace nanovllm::cuda::moe
