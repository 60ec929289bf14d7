// The two passes of RMSNorm and of the residual add + RMSNorm, for kernels that hold a row in
// one CTA, each thread kWidth elements at a time from threadIdx.x * kWidth on: rms_norm,
// add_rms_norm, and the experts' combine with the next norm folded in. One arithmetic for all,
// so that they round alike.
#pragma once

#include <cstdint>

#include "kernels/cuda/device/block_reduce.cuh"
#include "kernels/cuda/device/elementwise_math.cuh"
#include "kernels/cuda/device/vec.cuh"

namespace nanovllm::cuda {

// residual[0, kWidth) += a, rounded to T (HF adds in dtype), and the squares of the sums added
// to sum_squares: the norm is of the rounded value.
template <typename T, int kWidth>
__device__ __forceinline__ void add_to_residual(const float (&a)[kWidth], T* residual,
                                                float& sum_squares) {
  float r[kWidth];
  load_floats<T, kWidth>(residual, r);
#pragma unroll
  for (int j = 0; j < kWidth; ++j) {
    r[j] = round_to<T>(a[j] + r[j]);
    sum_squares += r[j] * r[j];
  }
  store_floats<T, kWidth>(residual, r);
}

// Once every thread of the CTA has summed the squares of its elements of `row` (through
// add_to_residual, or as read): out = the row's RMSNorm, each thread re-reading only its own
// elements (so out may be the row the sums came from). Every thread of the CTA must call it
// (block_sum).
template <typename T, int kWidth>
__device__ __forceinline__ void normalize_row(float sum_squares, const T* row, const T* weight,
                                              float eps, int64_t hidden, T* out) {
  const float inv_rms = inverse_rms(block_sum(sum_squares), hidden, eps);
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kWidth; i < hidden;
       i += static_cast<int64_t>(blockDim.x) * kWidth) {
    float r[kWidth];
    float w[kWidth];
    load_floats<T, kWidth>(row + i, r);
    load_floats<T, kWidth>(weight + i, w);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) r[j] = rms_normalize<T>(r[j], inv_rms, w[j]);
    store_floats<T, kWidth>(out + i, r);
  }
}

}  // namespace nanovllm::cuda
