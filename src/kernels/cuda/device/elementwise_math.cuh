// The elementwise math of RMSNorm, SiLU*mul and the q/k norm with rotary, shared by every
// kernel that computes them, so that fused and separate paths round exactly alike.
#pragma once

#include "kernels/cuda/device/vec.cuh"

namespace nanovllm::cuda {

// HF's Qwen3RMSNorm: weight * (x * inv_rms).to(dtype), the product rounded to dtype again.
template <typename T>
__device__ __forceinline__ float rms_normalize(float x, float inv_rms, float weight) {
  return round_to<T>(x * inv_rms) * weight;
}

// 1 / sqrt(mean(x^2) + eps) from the sum of squares of a row of `width` elements.
__device__ __forceinline__ float inverse_rms(float sum_squares, int64_t width, float eps) {
  return 1.0f / sqrtf(__fadd_rn(__fdiv_rn(sum_squares, static_cast<float>(width)), eps));
}

// HF rounds the activation to dtype before the product (act_fn(gate) * up). The fast exp and
// division are exact to a few fp32 ulps, far below the rounding to dtype; they matter where
// the GEMV makes its input on every CTA.
template <typename T>
__device__ __forceinline__ float silu_times(float gate, float up) {
  return round_to<T>(__fdividef(gate, 1.0f + __expf(-gate))) * up;
}

// One rotation pair (a, b) = (x[i], x[i + head_dim / 2]) of a q or k head, rotated in fp32 with
// the fp32 table (cos c, sin s) and rounded once: models without a q/k norm (Llama, Qwen2).
// A position outside the table (`valid` false) gives zeros.
template <typename T>
__device__ __forceinline__ void rotate_pair(float a, float b, float c, float s, bool valid,
                                            T& first, T& second) {
  if (!valid) {
    first = second = from_float<T>(0.0f);
    return;
  }
  // Spelled out, so that no kernel's compiler contracts it into other fused multiply-adds.
  first = from_float<T>(fmaf(a, c, -__fmul_rn(b, s)));
  second = from_float<T>(fmaf(b, c, __fmul_rn(a, s)));
}

// One rotation pair (a, b) = (x[i], x[i + head_dim / 2]) of a q or k head whose inverse RMS is
// inv_rms: HF's q_norm / k_norm output is rounded to dtype (weight * normed.to(dtype)); the
// rotation is then done in fp32 with the fp32 table (cos c, sin s) and rounded once. A
// position outside the table (`valid` false) gives zeros.
template <typename T>
__device__ __forceinline__ void normalize_rotate_pair(float a, float b, float inv_rms,
                                                      float weight_a, float weight_b, float c,
                                                      float s, bool valid, T& first, T& second) {
  rotate_pair<T>(round_to<T>(rms_normalize<T>(a, inv_rms, weight_a)),
                 round_to<T>(rms_normalize<T>(b, inv_rms, weight_b)), c, s, valid, first, second);
}

// sum + a^2 + b^2 over a rotation pair, contracted the same way in every kernel.
__device__ __forceinline__ float add_pair_squares(float sum, float a, float b) {
  return __fadd_rn(sum, fmaf(a, a, __fmul_rn(b, b)));
}

}  // namespace nanovllm::cuda
