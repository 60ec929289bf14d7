// The experts' two products pair by pair on the CUDA cores: the f32 path (exact enough for the
// golden tests; correct, not fast) and the fallback for widths or alignments the tensor-core
// GEMMs do not take. One warp per output, its lanes across the depth; act and weighted are
// indexed by pair, so no tile map is needed.
#include "core/check.h"
#include "kernels/cuda/device/block_reduce.cuh"
#include "kernels/cuda/device/elementwise_math.cuh"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kWarps = 8;  // outputs of a CTA

// grid (pairs, ceil(intermediate / kWarps)): warp w of CTA (p, c) makes act[p, c * kWarps + w].
template <typename T>
__global__ void moe_gate_up_simt_kernel(const T* x, int64_t x_stride, const int32_t* ids, int top_k,
                                        int experts, const T* gate_up, int64_t hidden,
                                        int64_t intermediate, T* act) {
  start_after_prior_kernels();
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t pair = blockIdx.x;
  const int64_t n = static_cast<int64_t>(blockIdx.y) * kWarps + threadIdx.x / 32;
  const int expert = ids[pair];
  if (expert < 0 || expert >= experts || n >= intermediate) return;
  const T* x_row = x + (pair / top_k) * x_stride;
  const T* gate = gate_up + (expert * 2 * intermediate + n) * hidden;
  const T* up = gate + intermediate * hidden;
  float gate_sum = 0.0f;
  float up_sum = 0.0f;
  for (int64_t h = lane; h < hidden; h += 32) {
    const float v = to_float(x_row[h]);
    gate_sum += v * to_float(gate[h]);
    up_sum += v * to_float(up[h]);
  }
  gate_sum = warp_sum(gate_sum);
  up_sum = warp_sum(up_sum);
  if (lane == 0) {
    act[pair * intermediate + n] =
        from_float<T>(silu_times<T>(round_to<T>(gate_sum), round_to<T>(up_sum)));
  }
}

// grid (pairs, ceil(hidden / kWarps)): warp w of CTA (p, c) makes weighted[p, c * kWarps + w].
template <typename T>
__global__ void moe_down_simt_kernel(const T* act, const int32_t* ids, const float* weights,
                                     int experts, const T* down, int64_t hidden,
                                     int64_t intermediate, T* weighted) {
  start_after_prior_kernels();
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t pair = blockIdx.x;
  const int64_t h = static_cast<int64_t>(blockIdx.y) * kWarps + threadIdx.x / 32;
  const int expert = ids[pair];
  if (expert < 0 || expert >= experts || h >= hidden) return;
  const T* act_row = act + pair * intermediate;
  const T* down_row = down + (expert * hidden + h) * intermediate;
  float sum = 0.0f;
  for (int64_t i = lane; i < intermediate; i += 32) {
    sum += to_float(act_row[i]) * to_float(down_row[i]);
  }
  sum = warp_sum(sum);
  if (lane == 0) weighted[pair * hidden + h] = from_float<T>(round_to<T>(sum) * weights[pair]);
}

dim3 simt_grid(int64_t pairs, int64_t outputs, const char* op) {
  const int64_t column_ctas = (outputs + kWarps - 1) / kWarps;
  NVLLM_CHECK_MSG(pairs <= INT32_MAX && column_ctas <= 65535, "{}: {} pairs of {} outputs", op,
                  pairs, outputs);
  return dim3(static_cast<unsigned>(pairs), static_cast<unsigned>(column_ctas));
}

}  // namespace

void moe_gate_up_simt(DType dtype, const void* x, int64_t x_stride, const int32_t* ids,
                      int64_t pairs, int top_k, int64_t experts, const void* gate_up,
                      int64_t hidden, int64_t intermediate, void* act, cudaStream_t stream) {
  if (pairs == 0 || intermediate == 0) return;
  const dim3 grid = simt_grid(pairs, intermediate, "moe_gate_up_simt");
  dispatch_float_dtype(dtype, "moe_gate_up_simt", [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(moe_gate_up_simt_kernel<T>, grid, kWarps * 32, 0, stream,
                  static_cast<const T*>(x), x_stride, ids, top_k, static_cast<int>(experts),
                  static_cast<const T*>(gate_up), hidden, intermediate, static_cast<T*>(act));
  });
}

void moe_down_simt(DType dtype, const void* act, const int32_t* ids, const float* weights,
                   int64_t pairs, int64_t experts, const void* down, int64_t hidden,
                   int64_t intermediate, void* weighted, cudaStream_t stream) {
  if (pairs == 0 || hidden == 0) return;
  const dim3 grid = simt_grid(pairs, hidden, "moe_down_simt");
  dispatch_float_dtype(dtype, "moe_down_simt", [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(moe_down_simt_kernel<T>, grid, kWarps * 32, 0, stream, static_cast<const T*>(act),
                  ids, weights, static_cast<int>(experts), static_cast<const T*>(down), hidden,
                  intermediate, static_cast<T*>(weighted));
  });
}

}  // namespace nanovllm::cuda
