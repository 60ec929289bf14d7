// out += x over rows, x's rows possibly all one (row stride 0): a linear's bias.
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/elementwise/elementwise.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

template <typename T, int kWidth>
__global__ void add_rows_kernel(const T* x, int64_t x_stride, int64_t width, T* out,
                                int64_t out_stride) {
  start_after_prior_kernels();
  const T* x_row = x + static_cast<int64_t>(blockIdx.x) * x_stride;
  T* out_row = out + static_cast<int64_t>(blockIdx.x) * out_stride;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kWidth; i < width;
       i += static_cast<int64_t>(blockDim.x) * kWidth) {
    float a[kWidth];
    float b[kWidth];
    load_floats<T, kWidth>(out_row + i, a);
    load_floats<T, kWidth>(x_row + i, b);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) a[j] += b[j];
    store_floats<T, kWidth>(out_row + i, a);
  }
}

}  // namespace

void add_rows(DType dtype, const void* x, int64_t x_stride, int64_t rows, int64_t width, void* out,
              int64_t out_stride, cudaStream_t stream) {
  if (rows == 0 || width == 0) return;
  NVLLM_CHECK_LE(rows, int64_t{INT32_MAX});
  dispatch_float_dtype(dtype, "add_rows", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x);
    T* o = static_cast<T*>(out);
    const auto grid = static_cast<unsigned>(rows);
    if (vectorizable<T>({x, out}, {width, x_stride, out_stride})) {
      constexpr int kWidth = kVecWidth<T>;
      launch_kernel(add_rows_kernel<T, kWidth>, grid, threads_for(width / kWidth), 0, stream, in,
                    x_stride, width, o, out_stride);
    } else {
      launch_kernel(add_rows_kernel<T, 1>, grid, threads_for(width), 0, stream, in, x_stride, width,
                    o, out_stride);
    }
  });
}

}  // namespace nanovllm::cuda
