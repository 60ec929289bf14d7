// x += bias on every row: a linear's bias (Qwen2's q/k/v projections).
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/elementwise/elementwise.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

template <typename T, int kWidth>
__global__ void add_bias_kernel(const T* bias, int64_t width, T* x, int64_t x_stride) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  T* row = x + static_cast<int64_t>(blockIdx.x) * x_stride;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kWidth; i < width;
       i += static_cast<int64_t>(blockDim.x) * kWidth) {
    float a[kWidth];
    float b[kWidth];
    load_floats<T, kWidth>(row + i, a);
    load_floats<T, kWidth>(bias + i, b);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) a[j] += b[j];
    store_floats<T, kWidth>(row + i, a);
  }
}

}  // namespace

void add_bias(DType dtype, const void* bias, int64_t rows, int64_t width, void* x, int64_t x_stride,
              cudaStream_t stream) {
  if (rows == 0 || width == 0) return;
  NVLLM_CHECK_LE(rows, int64_t{INT32_MAX});
  dispatch_float_dtype(dtype, "add_bias", [&](auto tag) {
    using T = decltype(tag);
    const T* b = static_cast<const T*>(bias);
    T* out = static_cast<T*>(x);
    const auto grid = static_cast<unsigned>(rows);
    if (vectorizable<T>({bias, x}, {width, x_stride})) {
      constexpr int kWidth = kVecWidth<T>;
      launch_kernel(add_bias_kernel<T, kWidth>, grid, threads_for(width / kWidth), 0, stream, b,
                    width, out, x_stride);
    } else {
      launch_kernel(add_bias_kernel<T, 1>, grid, threads_for(width), 0, stream, b, width, out,
                    x_stride);
    }
  });
}

}  // namespace nanovllm::cuda
