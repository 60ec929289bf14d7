// The residual stream's pending sum (Backend::rms_norm_mlp): int64 in units of 2^-32. Many CTAs
// add their partial sums to it with atomics; integer addition is associative, so the bits do
// not depend on the order they land in (a float atomic sum would differ from run to run).
// Magnitudes must stay below 2^31; the resolution, 2^-32, is finer than a float's above 2^-9.
#pragma once

#include <cstdint>

namespace nanovllm::cuda {

inline constexpr float kFixedPointScale = 4294967296.0f;  // 2^32

__device__ __forceinline__ float from_fixed_point(long long value) {
  return __ll2float_rn(value) * (1.0f / kFixedPointScale);
}

// *sum += value, rounded to the nearest unit.
__device__ __forceinline__ void add_fixed_point(int64_t* sum, float value) {
  const long long units = __float2ll_rn(value * kFixedPointScale);
  atomicAdd(reinterpret_cast<unsigned long long*>(sum), static_cast<unsigned long long>(units));
}

}  // namespace nanovllm::cuda
