// Row gather (embedding lookup, and the last token of each sequence before the LM head): one
// block per output row.
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/elementwise/elementwise.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

template <typename T, int kWidth>
__global__ void gather_rows_kernel(const T* x, int64_t x_stride, int64_t x_rows,
                                   const int32_t* indices, int64_t first_index, int64_t width,
                                   T* out, int64_t out_stride) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  const int64_t row = blockIdx.x;
  const int64_t index = indices[row] - first_index;
  // A kernel cannot throw: an index outside x gets a zero row instead of a wild read.
  const bool valid = index >= 0 && index < x_rows;
  const T* src = x + (valid ? static_cast<int64_t>(index) : 0) * x_stride;
  T* dst = out + row * out_stride;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kWidth; i < width;
       i += static_cast<int64_t>(blockDim.x) * kWidth) {
    if (valid) {
      copy_elements<T, kWidth>(src + i, dst + i);
    } else {
      zero_elements<T, kWidth>(dst + i);
    }
  }
}

}  // namespace

void gather_rows(DType dtype, const void* x, int64_t x_stride, int64_t x_rows,
                 const int32_t* indices, int64_t first_index, int64_t count, int64_t width,
                 void* out, int64_t out_stride, cudaStream_t stream) {
  if (count == 0 || width == 0) return;
  NVLLM_CHECK_LE(count, int64_t{INT32_MAX});
  dispatch_float_dtype(dtype, "gather_rows", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x);
    T* o = static_cast<T*>(out);
    const auto grid = static_cast<unsigned>(count);
    if (vectorizable<T>({x, out}, {width, x_stride, out_stride})) {
      constexpr int kWidth = kVecWidth<T>;
      launch_kernel(gather_rows_kernel<T, kWidth>, grid, threads_for(width / kWidth), 0, stream, in,
                    x_stride, x_rows, indices, first_index, width, o, out_stride);
    } else {
      launch_kernel(gather_rows_kernel<T, 1>, grid, threads_for(width), 0, stream, in, x_stride,
                    x_rows, indices, first_index, width, o, out_stride);
    }
  });
}

}  // namespace nanovllm::cuda
