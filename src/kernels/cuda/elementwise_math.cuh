// The elementwise math of RMSNorm and SiLU*mul, shared by their own kernels and the GEMV that
// fuses them into its input, so that both round exactly alike.
#pragma once

#include "kernels/cuda/vec.cuh"

namespace nanovllm::cuda {

// HF's Qwen3RMSNorm: weight * (x * inv_rms).to(dtype), the product rounded to dtype again.
template <typename T>
__device__ __forceinline__ float rms_normalize(float x, float inv_rms, float weight) {
  return round_to<T>(x * inv_rms) * weight;
}

// 1 / sqrt(mean(x^2) + eps) from the sum of squares of a row of `width` elements.
__device__ __forceinline__ float inverse_rms(float sum_squares, int64_t width, float eps) {
  return 1.0f / sqrtf(sum_squares / static_cast<float>(width) + eps);
}

// HF rounds the activation to dtype before the product (act_fn(gate) * up). The fast exp and
// division are exact to a few fp32 ulps, far below the rounding to dtype; they matter where
// the GEMV makes its input on every CTA.
template <typename T>
__device__ __forceinline__ float silu_times(float gate, float up) {
  return round_to<T>(__fdividef(gate, 1.0f + __expf(-gate))) * up;
}

}  // namespace nanovllm::cuda
