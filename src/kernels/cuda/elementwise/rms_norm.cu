// RMSNorm and the fused residual add + RMSNorm: one block per row. The first pass sums the
// squares, the second (re-reading the row, now in cache) normalizes; a thread reads and writes
// only its own elements, so out may be x.
#include "kernels/cuda/device/residual_norm.cuh"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/elementwise/elementwise.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

template <typename T, int kWidth>
__global__ void rms_norm_kernel(const T* x, int64_t x_stride, const T* weight, float eps,
                                int64_t hidden, T* out, int64_t out_stride) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  const T* in_row = x + static_cast<int64_t>(blockIdx.x) * x_stride;
  T* out_row = out + static_cast<int64_t>(blockIdx.x) * out_stride;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * kWidth;
  const int64_t step = static_cast<int64_t>(blockDim.x) * kWidth;

  float sum_squares = 0.0f;
  for (int64_t i = first; i < hidden; i += step) {
    float v[kWidth];
    load_floats<T, kWidth>(in_row + i, v);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) sum_squares += v[j] * v[j];
  }
  normalize_row<T, kWidth>(sum_squares, in_row, weight, eps, hidden, out_row);
}

template <typename T, int kWidth>
__global__ void add_rms_norm_kernel(T* x, int64_t x_stride, T* residual, int64_t residual_stride,
                                    const T* weight, float eps, int64_t hidden) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  T* x_row = x + static_cast<int64_t>(blockIdx.x) * x_stride;
  T* res_row = residual + static_cast<int64_t>(blockIdx.x) * residual_stride;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * kWidth;
  const int64_t step = static_cast<int64_t>(blockDim.x) * kWidth;

  float sum_squares = 0.0f;
  for (int64_t i = first; i < hidden; i += step) {
    float a[kWidth];
    load_floats<T, kWidth>(x_row + i, a);
    add_to_residual<T, kWidth>(a, res_row + i, sum_squares);
  }
  normalize_row<T, kWidth>(sum_squares, res_row, weight, eps, hidden, x_row);
}

}  // namespace

void rms_norm(DType dtype, const void* x, int64_t x_stride, const void* weight, float eps,
              int64_t rows, int64_t hidden, void* out, int64_t out_stride, cudaStream_t stream) {
  if (rows == 0 || hidden == 0) return;
  NVLLM_CHECK_LE(rows, int64_t{INT32_MAX});
  dispatch_float_dtype(dtype, "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x);
    const T* w = static_cast<const T*>(weight);
    T* o = static_cast<T*>(out);
    const auto grid = static_cast<unsigned>(rows);
    if (vectorizable<T>({x, weight, out}, {hidden, x_stride, out_stride})) {
      constexpr int kWidth = kVecWidth<T>;
      launch_kernel(rms_norm_kernel<T, kWidth>, grid, threads_for(hidden / kWidth), 0, stream, in,
                    x_stride, w, eps, hidden, o, out_stride);
    } else {
      launch_kernel(rms_norm_kernel<T, 1>, grid, threads_for(hidden), 0, stream, in, x_stride, w,
                    eps, hidden, o, out_stride);
    }
  });
}

void add_rms_norm(DType dtype, void* x, int64_t x_stride, void* residual, int64_t residual_stride,
                  const void* weight, float eps, int64_t rows, int64_t hidden,
                  cudaStream_t stream) {
  if (rows == 0 || hidden == 0) return;
  NVLLM_CHECK_LE(rows, int64_t{INT32_MAX});
  dispatch_float_dtype(dtype, "add_rms_norm", [&](auto tag) {
    using T = decltype(tag);
    T* xs = static_cast<T*>(x);
    T* rs = static_cast<T*>(residual);
    const T* w = static_cast<const T*>(weight);
    const auto grid = static_cast<unsigned>(rows);
    if (vectorizable<T>({x, residual, weight}, {hidden, x_stride, residual_stride})) {
      constexpr int kWidth = kVecWidth<T>;
      launch_kernel(add_rms_norm_kernel<T, kWidth>, grid, threads_for(hidden / kWidth), 0, stream,
                    xs, x_stride, rs, residual_stride, w, eps, hidden);
    } else {
      launch_kernel(add_rms_norm_kernel<T, 1>, grid, threads_for(hidden), 0, stream, xs, x_stride,
                    rs, residual_stride, w, eps, hidden);
    }
  });
}

}  // namespace nanovllm::cuda
