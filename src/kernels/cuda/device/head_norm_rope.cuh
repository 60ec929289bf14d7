// The q/k head RMSNorm with rotary of one head by one warp, shared by qk_norm_rope() and the
// kernels that do it on the fly (decode attention), so that all of them round alike.
#pragma once

#include "kernels/cuda/device/block_reduce.cuh"
#include "kernels/cuda/device/elementwise_math.cuh"

namespace nanovllm::cuda {

// What a lane needs besides the head itself: the norm weight and the rotary cos and sin at
// its pairs (i, i + kHeadDim / 2), i = lane + 32 p. They are constants and per-step
// metadata, so kernels can read them before they wait for the kernel before (launch.cuh).
template <int kHeadDim>
struct HeadNormRopeFactors {
  static constexpr int kPairs = kHeadDim / 64;
  float weight_first[kPairs], weight_second[kPairs], cos[kPairs], sin[kPairs];
  bool normalize = true;  // false: a model without q/k norm, rotary only

  // weight [kHeadDim] or null (no norm); cos_sin: the position's row of the rotary table, cos
  // half then sin half.
  template <typename T>
  __device__ __forceinline__ void load(const T* weight, const float* cos_sin, int lane) {
    constexpr int kHalf = kHeadDim / 2;
    normalize = weight != nullptr;
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      const int i = lane + 32 * p;
      weight_first[p] = normalize ? to_float(weight[i]) : 1.0f;
      weight_second[p] = normalize ? to_float(weight[i + kHalf]) : 1.0f;
      cos[p] = cos_sin[i];
      sin[p] = cos_sin[i + kHalf];
    }
  }
};

// Lane `lane`'s rotation pairs (i, i + kHeadDim / 2), i = lane + 32 p, of a raw q or k head.
template <int kHeadDim>
struct HeadPairs {
  static constexpr int kPairs = kHeadDim / 64;
  float a[kPairs], b[kPairs];

  template <typename T>
  __device__ __forceinline__ void load(const T* head, int lane) {
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      a[p] = to_float(head[lane + 32 * p]);
      b[p] = to_float(head[lane + 32 * p + kHeadDim / 2]);
    }
  }
};

// The pairs after qk_norm_rope()'s per-head RMSNorm (where the factors have a weight) and
// rotary, rounded exactly as it does. Called by whole warps.
template <typename T, int kHeadDim>
__device__ __forceinline__ void normalize_rotate_pairs(const HeadPairs<kHeadDim>& pairs,
                                                       const HeadNormRopeFactors<kHeadDim>& factors,
                                                       bool valid, float eps,
                                                       T (&first)[kHeadDim / 64],
                                                       T (&second)[kHeadDim / 64]) {
  constexpr int kPairs = kHeadDim / 64;
  if (!factors.normalize) {  // uniform over the warp
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      rotate_pair<T>(pairs.a[p], pairs.b[p], factors.cos[p], factors.sin[p], valid, first[p],
                     second[p]);
    }
    return;
  }
  float sum_squares = 0.0f;
#pragma unroll
  for (int p = 0; p < kPairs; ++p) {
    sum_squares = add_pair_squares(sum_squares, pairs.a[p], pairs.b[p]);  // qk_norm_rope's order
  }
  const float inv_rms = inverse_rms(warp_sum(sum_squares), kHeadDim, eps);
#pragma unroll
  for (int p = 0; p < kPairs; ++p) {
    normalize_rotate_pair<T>(pairs.a[p], pairs.b[p], inv_rms, factors.weight_first[p],
                             factors.weight_second[p], factors.cos[p], factors.sin[p], valid,
                             first[p], second[p]);
  }
}

// The same, loading the head.
template <typename T, int kHeadDim>
__device__ __forceinline__ void normalize_rotate_head(const T* head,
                                                      const HeadNormRopeFactors<kHeadDim>& factors,
                                                      bool valid, float eps, int lane,
                                                      T (&first)[kHeadDim / 64],
                                                      T (&second)[kHeadDim / 64]) {
  HeadPairs<kHeadDim> pairs;
  pairs.load(head, lane);
  normalize_rotate_pairs<T, kHeadDim>(pairs, factors, valid, eps, first, second);
}

}  // namespace nanovllm::cuda
