// SwiGLU activation: out = silu(gate) * up over rows of gate_up = [gate | up]; one block per row.
#include "kernels/cuda/device/elementwise_math.cuh"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/elementwise/elementwise.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

template <typename T, int kWidth>
__global__ void silu_mul_kernel(const T* gate_up, int64_t gate_up_stride, int64_t width, T* out,
                                int64_t out_stride) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  const T* gate = gate_up + static_cast<int64_t>(blockIdx.x) * gate_up_stride;  // [width]
  const T* up = gate + width;                                                   // [width]
  T* out_row = out + static_cast<int64_t>(blockIdx.x) * out_stride;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kWidth; i < width;
       i += static_cast<int64_t>(blockDim.x) * kWidth) {
    float g[kWidth];
    float u[kWidth];
    load_floats<T, kWidth>(gate + i, g);
    load_floats<T, kWidth>(up + i, u);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) g[j] = silu_times<T>(g[j], u[j]);
    store_floats<T, kWidth>(out_row + i, g);
  }
}

}  // namespace

void silu_mul(DType dtype, const void* gate_up, int64_t gate_up_stride, int64_t rows, int64_t width,
              void* out, int64_t out_stride, cudaStream_t stream) {
  if (rows == 0 || width == 0) return;
  NVLLM_CHECK_LE(rows, int64_t{INT32_MAX});
  dispatch_float_dtype(dtype, "silu_mul", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(gate_up);
    T* o = static_cast<T*>(out);
    const auto grid = static_cast<unsigned>(rows);
    if (vectorizable<T>({gate_up, out}, {width, gate_up_stride, out_stride})) {
      constexpr int kWidth = kVecWidth<T>;
      launch_kernel(silu_mul_kernel<T, kWidth>, grid, threads_for(width / kWidth), 0, stream, in,
                    gate_up_stride, width, o, out_stride);
    } else {
      launch_kernel(silu_mul_kernel<T, 1>, grid, threads_for(width), 0, stream, in, gate_up_stride,
                    width, o, out_stride);
    }
  });
}

}  // namespace nanovllm::cuda
