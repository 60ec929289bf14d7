// pending += down(silu(gate) * up) for one row, [gate | up] = rms_norm(x) @ gate_up^T, in one
// kernel of one wave: CTA c owns intermediate columns [c * per_cta, (c + 1) * per_cta). It
// copies its gate and up rows and its columns of down into shared memory before waiting for
// the kernel before (launch.cuh), so the weights stream in while that one runs. After the
// wait every warp reads the whole x row and normalizes it itself (no CTA barrier for the
// norm), the warps share out the gate and up rows, a barrier later the CTA has its SiLU * up
// values, and each thread multiplies them into its rows of down and adds the products to the
// pending sum. A CTA's products reach every output, so the sum is taken with atomics, in
// fixed point so that it is the same whatever order they land in.
#include "kernels/cuda/fused_mlp.h"

#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/attention_mma.cuh"
#include "kernels/cuda/elementwise_math.cuh"
#include "kernels/cuda/fixed_point.cuh"
#include "kernels/cuda/launch.cuh"

namespace nanovllm::cuda {
namespace {

using attention::cp_async_16;
using attention::cp_async_commit;
using attention::cp_async_wait;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kElemsPerVector = 8;  // bf16/f16 elements in 16 bytes
// A CTA's weights, at most: with one GEMV CTA of the kernel before on the same SM (o_proj's,
// 68 KB) the two still fit in an SM's 228 KB, so this kernel's copies start while it runs.
constexpr size_t kMaxSmemBytes = size_t{160} << 10;

template <typename T>
struct MlpParams {
  const T* x;
  const T* norm_weight;
  float eps;
  const T* gate_up;
  int64_t ld_gate_up;
  const T* down;
  int64_t ld_down;
  int64_t* pending;
  int hidden;
  int intermediate;
  int per_cta;
};

// Shared memory: the CTA's gate rows then its up rows [2 per_cta][hidden], its columns of
// down [hidden][per_cta], then the gate and up sums [2 per_cta] and SiLU * up [per_cta].
size_t smem_bytes(int64_t hidden, int64_t per_cta) {
  return static_cast<size_t>(3 * per_cta * hidden) * 2 + static_cast<size_t>(3 * per_cta) * 4;
}

// The fewest columns per CTA, a multiple of 8, that cover the intermediate width in one wave.
int64_t columns_per_cta(int64_t intermediate, int num_sms) {
  const int64_t per_sm = (intermediate + num_sms - 1) / num_sms;
  return (per_sm + kElemsPerVector - 1) / kElemsPerVector * kElemsPerVector;
}

// grid: one CTA per per_cta columns; block: kThreads. Lane l of every warp holds x's vectors
// l, l + 32, ..., kVectorsPerLane of them (hidden = 256 kVectorsPerLane).
template <typename T, int kVectorsPerLane>
__global__ void __launch_bounds__(kThreads) rms_norm_mlp_kernel(const MlpParams<T> p) {
  extern __shared__ uint4 smem[];
  const int row_vectors = p.hidden / kElemsPerVector;          // of x and of a gate/up row
  const int slice_vectors = p.per_cta / kElemsPerVector;       // of a down row's slice
  const int first = static_cast<int>(blockIdx.x) * p.per_cta;  // intermediate column
  const int count = min(p.per_cta, p.intermediate - first);    // a multiple of 8
  const int count_vectors = count / kElemsPerVector;
  uint4* gate_up = smem;                                // [2 per_cta][row_vectors]
  uint4* down = gate_up + 2 * p.per_cta * row_vectors;  // [hidden][slice_vectors]
  float* sums = reinterpret_cast<float*>(down + p.hidden * slice_vectors);  // [2 per_cta]
  float* act = sums + 2 * p.per_cta;                                        // [per_cta]
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;

  // Weights only until the wait: gate rows [0, count), up rows [count, 2 count).
  allow_next_kernel_launch();
  for (int i = threadIdx.x; i < 2 * count * row_vectors; i += kThreads) {
    const int r = i / row_vectors;
    const int64_t row = r < count ? first + r : p.intermediate + first + (r - count);
    cp_async_16(gate_up + i, p.gate_up + row * p.ld_gate_up + (i % row_vectors) * kElemsPerVector,
                true);
  }
  for (int i = threadIdx.x; i < p.hidden * count_vectors; i += kThreads) {
    const int row = i / count_vectors;
    const int v = i % count_vectors;
    cp_async_16(down + row * slice_vectors + v,
                p.down + row * p.ld_down + first + v * kElemsPerVector, true);
  }
  cp_async_commit();
  uint4 scale[kVectorsPerLane];
#pragma unroll
  for (int i = 0; i < kVectorsPerLane; ++i) {
    scale[i] = reinterpret_cast<const uint4*>(p.norm_weight)[lane + 32 * i];
  }
  wait_for_prior_kernels();

  // x, normalized as rms_norm rounds it; every warp the whole row.
  float x[kVectorsPerLane][kElemsPerVector];
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kVectorsPerLane; ++i) {
    unpack8<T>(reinterpret_cast<const uint4*>(p.x)[lane + 32 * i], x[i]);
#pragma unroll
    for (int e = 0; e < kElemsPerVector; ++e) squares += x[i][e] * x[i][e];
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    squares += __shfl_xor_sync(0xffffffffu, squares, offset);
  }
  const float inv_rms = inverse_rms(squares, p.hidden, p.eps);
#pragma unroll
  for (int i = 0; i < kVectorsPerLane; ++i) {
    float w[kElemsPerVector];
    unpack8<T>(scale[i], w);
#pragma unroll
    for (int e = 0; e < kElemsPerVector; ++e) {
      x[i][e] = round_to<T>(rms_normalize<T>(x[i][e], inv_rms, w[e]));
    }
  }

  cp_async_wait<0>();
  __syncthreads();  // every thread's weight copies have landed
  // Warp w takes gate/up rows w, w + kWarps, ...; each sum is rounded as linear rounds gate_up.
  for (int r = warp; r < 2 * count; r += kWarps) {
    const uint4* row = gate_up + r * row_vectors;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kVectorsPerLane; ++i) {
      float w[kElemsPerVector];
      unpack8<T>(row[lane + 32 * i], w);
      sum += dot8(x[i], w);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) sums[r] = round_to<T>(sum);
  }
  __syncthreads();
  for (int j = threadIdx.x; j < count; j += kThreads) {
    act[j] = round_to<T>(silu_times<T>(sums[j], sums[count + j]));
  }
  __syncthreads();
  // Thread t takes outputs t, t + kThreads, ...: its row of down's slice times SiLU * up.
  for (int row = threadIdx.x; row < p.hidden; row += kThreads) {
    const uint4* slice = down + row * slice_vectors;
    float sum = 0.0f;
    for (int v = 0; v < count_vectors; ++v) {
      float w[kElemsPerVector];
      unpack8<T>(slice[v], w);
      float a[kElemsPerVector];
#pragma unroll
      for (int e = 0; e < kElemsPerVector; ++e) a[e] = act[v * kElemsPerVector + e];
      sum += dot8(a, w);
    }
    add_fixed_point(p.pending + row, sum);
  }
}

template <typename T, int kVectorsPerLane>
void launch_mlp(const RmsNormMlpArgs& args, cudaStream_t stream) {
  const int64_t per_cta = columns_per_cta(args.intermediate, args.num_sms);
  const size_t smem = smem_bytes(args.hidden, per_cta);
  const auto kernel = rms_norm_mlp_kernel<T, kVectorsPerLane>;
  // One value for every launch (the largest served), so the call is idempotent.
  NVLLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kMaxSmemBytes)));
  const MlpParams<T> params{static_cast<const T*>(args.x),
                            static_cast<const T*>(args.norm_weight),
                            args.eps,
                            static_cast<const T*>(args.gate_up),
                            args.ld_gate_up,
                            static_cast<const T*>(args.down),
                            args.ld_down,
                            args.pending,
                            static_cast<int>(args.hidden),
                            static_cast<int>(args.intermediate),
                            static_cast<int>(per_cta)};
  const auto ctas = static_cast<unsigned>((args.intermediate + per_cta - 1) / per_cta);
  launch_kernel(kernel, ctas, kThreads, smem, stream, params);
}

template <typename T>
void launch_for_width(const RmsNormMlpArgs& args, cudaStream_t stream) {
  switch (args.hidden / (32 * kElemsPerVector)) {
    case 1:
      return launch_mlp<T, 1>(args, stream);
    case 2:
      return launch_mlp<T, 2>(args, stream);
    case 4:
      return launch_mlp<T, 4>(args, stream);
    default:
      return launch_mlp<T, 8>(args, stream);
  }
}

template <typename T>
__global__ void fold_pending_kernel(T* residual, int64_t* pending, int width) {
  start_after_prior_kernels();
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < width;
       i += static_cast<int>(gridDim.x * blockDim.x)) {
    residual[i] = from_float<T>(to_float(residual[i]) + from_fixed_point(pending[i]));
    pending[i] = 0;
  }
}

bool aligned_16(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

}  // namespace

bool rms_norm_mlp_serves(DType dtype, int64_t hidden, int64_t intermediate, int num_sms) {
  const int64_t vectors_per_lane = hidden / (32 * kElemsPerVector);
  const bool width_ok =
      hidden % (32 * kElemsPerVector) == 0 && (vectors_per_lane == 1 || vectors_per_lane == 2 ||
                                               vectors_per_lane == 4 || vectors_per_lane == 8);
  return (dtype == DType::kBF16 || dtype == DType::kF16) && width_ok && intermediate > 0 &&
         intermediate % kElemsPerVector == 0 && num_sms > 0 &&
         smem_bytes(hidden, columns_per_cta(intermediate, num_sms)) <= kMaxSmemBytes;
}

void rms_norm_mlp(const RmsNormMlpArgs& args, cudaStream_t stream) {
  NVLLM_CHECK_MSG(rms_norm_mlp_serves(args.dtype, args.hidden, args.intermediate, args.num_sms),
                  "rms_norm_mlp: {} x {} ({}) is not served", args.hidden, args.intermediate,
                  dtype_name(args.dtype));
  NVLLM_CHECK_MSG(aligned_16(args.x) && aligned_16(args.norm_weight) && aligned_16(args.gate_up) &&
                      aligned_16(args.down) && args.ld_gate_up % kElemsPerVector == 0 &&
                      args.ld_down % kElemsPerVector == 0 && args.pending != nullptr,
                  "rms_norm_mlp: operands must be 16-byte aligned with row strides in multiples "
                  "of 8 elements");
  if (args.dtype == DType::kBF16) {
    launch_for_width<__nv_bfloat16>(args, stream);
  } else {
    launch_for_width<__half>(args, stream);
  }
}

void fold_pending(DType dtype, void* residual, int64_t* pending, int64_t width,
                  cudaStream_t stream) {
  NVLLM_CHECK_MSG(dtype == DType::kBF16 || dtype == DType::kF16,
                  "fold_pending: dtype {} is not served", dtype_name(dtype));
  NVLLM_CHECK_LE(width, int64_t{INT32_MAX});
  const auto blocks = static_cast<unsigned>(std::max<int64_t>(1, (width + 1023) / 1024));
  if (dtype == DType::kBF16) {
    launch_kernel(fold_pending_kernel<__nv_bfloat16>, blocks, 1024, 0, stream,
                  static_cast<__nv_bfloat16*>(residual), pending, static_cast<int>(width));
  } else {
    launch_kernel(fold_pending_kernel<__half>, blocks, 1024, 0, stream,
                  static_cast<__half*>(residual), pending, static_cast<int>(width));
  }
}

}  // namespace nanovllm::cuda
