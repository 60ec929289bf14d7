// The last step of the experts: each row's top_k weighted expert outputs summed in f32, in
// slot order, and rounded once; with a residual, the next add_rms_norm folded in (its
// arithmetic, device/residual_norm.cuh). One CTA per row; no atomics, so the bits never depend
// on timing.
#include "core/check.h"
#include "kernels/cuda/device/residual_norm.cuh"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kGroup = 8;  // slots whose loads are in flight together

// kSlots: `weighted` is y [slots, hidden] by slot, pair p's row y[pair_slots[p]], times its
// routing weight and rounded here (the Hopper path); else [pairs, hidden], weighted already.
// With residual (uniform over the grid), the rounded sum is added to it and out gets the norm.
template <typename T, int kWidth, bool kSlots>
__global__ void moe_combine_kernel(const T* weighted, const int32_t* pair_slots,
                                   const float* weights, const int32_t* ids, int top_k, int experts,
                                   int64_t hidden, T* out, int64_t out_stride, T* residual,
                                   int64_t residual_stride, const T* norm_weight, float eps) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  const int64_t row = blockIdx.x;
  const int32_t* row_ids = ids + row * top_k;
  const T* first = weighted + row * top_k * hidden;
  T* out_row = out + row * out_stride;
  T* residual_row = residual != nullptr ? residual + row * residual_stride : nullptr;
  float sum_squares = 0.0f;
  for (int64_t h = static_cast<int64_t>(threadIdx.x) * kWidth; h < hidden;
       h += static_cast<int64_t>(blockDim.x) * kWidth) {
    float sum[kWidth];
#pragma unroll
    for (int i = 0; i < kWidth; ++i) sum[i] = 0.0f;
    for (int j0 = 0; j0 < top_k; j0 += kGroup) {
      // kGroup slots' loads first, then their sum in slot order.
      float v[kGroup][kWidth];
      bool used[kGroup];
#pragma unroll
      for (int u = 0; u < kGroup; ++u) {
        const int j = j0 + u;
        const int expert = j < top_k ? row_ids[j] : -1;
        used[u] = expert >= 0 && expert < experts;  // else never computed: adds nothing
        if (!used[u]) continue;
        if constexpr (kSlots) {
          const int64_t pair = row * top_k + j;
          load_floats<T, kWidth>(weighted + pair_slots[pair] * hidden + h, v[u]);
          const float weight = weights[pair];
#pragma unroll
          for (int i = 0; i < kWidth; ++i) v[u][i] = round_to<T>(v[u][i] * weight);
        } else {
          load_floats<T, kWidth>(first + j * hidden + h, v[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < kGroup; ++u) {
        if (!used[u]) continue;
#pragma unroll
        for (int i = 0; i < kWidth; ++i) sum[i] += v[u][i];
      }
    }
    if (residual_row == nullptr) {
      store_floats<T, kWidth>(out_row + h, sum);
      continue;
    }
#pragma unroll
    for (int i = 0; i < kWidth; ++i) sum[i] = round_to<T>(sum[i]);
    add_to_residual<T, kWidth>(sum, residual_row + h, sum_squares);
  }
  if (residual_row != nullptr) {
    normalize_row<T, kWidth>(sum_squares, residual_row, norm_weight, eps, hidden, out_row);
  }
}

template <bool kSlots>
void launch_combine(DType dtype, const void* weighted, const int32_t* pair_slots,
                    const float* weights, const int32_t* ids, int64_t rows, int top_k,
                    int64_t experts, int64_t hidden, void* out, int64_t out_stride,
                    const MoeAddRmsNorm& then, cudaStream_t stream) {
  if (rows == 0 || hidden == 0) return;
  NVLLM_CHECK_LE(rows, int64_t{INT32_MAX});
  NVLLM_CHECK_MSG(then.residual == nullptr || then.weight != nullptr,
                  "moe_combine: a residual without a norm weight");
  dispatch_float_dtype(dtype, "moe_combine", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(weighted);
    T* o = static_cast<T*>(out);
    T* residual = static_cast<T*>(then.residual);
    const T* norm = static_cast<const T*>(then.weight);
    const auto grid = static_cast<unsigned>(rows);
    // add_rms_norm's vector width where it would take one, so that the sums of squares add up
    // in the same order.
    if (vectorizable<T>({weighted, out, then.residual, then.weight},
                        {hidden, out_stride, then.residual_stride})) {
      constexpr int kWidth = kVecWidth<T>;
      launch_kernel(moe_combine_kernel<T, kWidth, kSlots>, grid, threads_for(hidden / kWidth), 0,
                    stream, in, pair_slots, weights, ids, top_k, static_cast<int>(experts), hidden,
                    o, out_stride, residual, then.residual_stride, norm, then.eps);
    } else {
      launch_kernel(moe_combine_kernel<T, 1, kSlots>, grid, threads_for(hidden), 0, stream, in,
                    pair_slots, weights, ids, top_k, static_cast<int>(experts), hidden, o,
                    out_stride, residual, then.residual_stride, norm, then.eps);
    }
  });
}

}  // namespace

void moe_combine(DType dtype, const void* weighted, const int32_t* ids, int64_t rows, int top_k,
                 int64_t experts, int64_t hidden, void* out, int64_t out_stride,
                 cudaStream_t stream, const MoeAddRmsNorm& then) {
  launch_combine<false>(dtype, weighted, nullptr, nullptr, ids, rows, top_k, experts, hidden, out,
                        out_stride, then, stream);
}

void moe_combine_slots(DType dtype, const void* y, const int32_t* pair_slots, const int32_t* ids,
                       const float* weights, int64_t rows, int top_k, int64_t experts,
                       int64_t hidden, void* out, int64_t out_stride, cudaStream_t stream,
                       const MoeAddRmsNorm& then) {
  NVLLM_CHECK_MSG(pair_slots != nullptr && weights != nullptr, "moe_combine_slots: no slots");
  launch_combine<true>(dtype, y, pair_slots, weights, ids, rows, top_k, experts, hidden, out,
                       out_stride, then, stream);
}

}  // namespace nanovllm::cuda
