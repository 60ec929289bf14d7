// pending += down(silu(gate) * up) for one row, [gate | up] = rms_norm(x) @ gate_up^T, in one
// kernel: CTA c owns intermediate columns [c * kColumns, (c + 1) * kColumns). Before waiting for
// the kernel before (launch.cuh) it copies its gate and up rows and its columns of down into
// shared memory, so the weights stream in while that one runs. A CTA of 16 columns fits beside
// one of decode attention's or o_proj's CTAs, so that much of the MLP streams in while
// attention, bound by latency, leaves memory idle (CTAs of 24 columns, one an SM: batch-1 -8%);
// it asks for half an SM's shared memory, so that no GEMV CTA shares an SM with two of them
// (see launch_mlp). After the wait every warp reads the whole x row and normalizes it itself
// (no CTA barrier for the norm), the warps share out the gate and up rows, a barrier later the
// CTA has its SiLU * up values, and each thread multiplies them into its rows of down and adds
// the products to the pending sum. A CTA's products reach every output, so the sum is taken
// with atomics, in fixed point so that it is the same whatever order they land in.
#include "kernels/cuda/linear/fused_mlp.h"

#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/device/elementwise_math.cuh"
#include "kernels/cuda/device/l2_hints.cuh"
#include "kernels/cuda/device/tensor_core.cuh"
#include "kernels/cuda/linear/fixed_point.cuh"
#include "kernels/cuda/runtime/alignment.h"
#include "kernels/cuda/runtime/launch.cuh"
#include "kernels/cuda/runtime/sm_residency.h"

namespace nanovllm::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kElemsPerVector = 8;                         // bf16/f16 elements in 16 bytes
constexpr int kColumns = 16;                               // intermediate columns a CTA owns
constexpr int kSliceVectors = kColumns / kElemsPerVector;  // of a down row's slice
constexpr int kRowsPerWarp = 2 * kColumns / kWarps;        // gate and up rows a warp sums
static_assert(2 * kColumns % kWarps == 0, "every warp sums as many gate and up rows");
// At most two CTAs an SM (each asks for half its shared memory): a launch must fit in one wave.
constexpr int kMaxCtasPerSm = 2;
// A CTA sends its weight copies in this many parts, each once the one before has landed, so
// that fewer of the MLP's 18 MB wait in memory's queues at once ahead of the loads that the
// kernels running meanwhile (attention, o_proj) wait for: batch-1 +1.5% with 2 parts, -3%
// with 6 (docs/BENCHMARKS.md).
constexpr int kWeightPhases = 2;

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
  int intermediate;
};

// Shared memory: the CTA's gate rows then its up rows [2 kColumns][hidden], its columns of
// down [hidden][kColumns], then the gate and up sums [2 kColumns] and SiLU * up [kColumns].
size_t smem_bytes(int64_t hidden) {
  return static_cast<size_t>(3 * kColumns * hidden) * 2 + static_cast<size_t>(3 * kColumns) * 4;
}

// grid: one CTA per kColumns columns; block: kThreads. hidden = kThreads * kRows: lane l of
// every warp holds x's vectors l, l + 32, ..., kRows of them, and thread t computes outputs
// t, t + kThreads, ..., kRows of them.
template <typename T, int kRows>
__global__ void __launch_bounds__(kThreads) rms_norm_mlp_kernel(const MlpParams<T> p) {
  NVLLM_TIMELINE_SCOPE();
  constexpr int kHidden = kThreads * kRows;
  constexpr int kRowVectors = kHidden / kElemsPerVector;  // of x and of a gate/up row
  extern __shared__ uint4 smem[];
  uint4* gate_up = smem;                               // [2 kColumns][kRowVectors]
  uint4* down = gate_up + 2 * kColumns * kRowVectors;  // [kHidden][kSliceVectors]
  float* sums = reinterpret_cast<float*>(down + kHidden * kSliceVectors);  // [2 kColumns]
  float* act = sums + 2 * kColumns;                                        // [kColumns]
  const int first = static_cast<int>(blockIdx.x) * kColumns;               // intermediate column
  const int count = min(kColumns, p.intermediate - first);                 // a multiple of 8
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;

  // Weights only until the wait: gate rows [0, count), up rows [count, 2 count). They are
  // streamed once a step, so they leave L2 first (l2_hints.cuh).
  allow_next_kernel_launch();
  const uint64_t weight_policy = l2_evict_first_policy();
  // Vector i of the CTA's weights: gate and up rows' vectors, then down's.
  const int gate_up_vectors = 2 * count * kRowVectors;
  const int weight_vectors = gate_up_vectors + kHidden * kSliceVectors;
  const auto copy_weight = [&](int i) {
    if (i < gate_up_vectors) {
      const int r = i / kRowVectors;
      const int64_t row = r < count ? first + r : p.intermediate + first + (r - count);
      cp_async_16(gate_up + i, p.gate_up + row * p.ld_gate_up + (i % kRowVectors) * kElemsPerVector,
                  true, weight_policy);
    } else {
      const int j = i - gate_up_vectors;
      const int v = j % kSliceVectors;  // past count: zeros, against SiLU * up's zeros
      cp_async_16(down + j, p.down + (j / kSliceVectors) * p.ld_down + first + v * kElemsPerVector,
                  v * kElemsPerVector < count, weight_policy);
    }
  };
  // In kWeightPhases parts, each sent once the one before has landed (see kWeightPhases).
  const int per_phase = (weight_vectors + kWeightPhases - 1) / kWeightPhases;
  for (int phase = 0; phase < kWeightPhases; ++phase) {
    if (phase > 0) cp_async_wait<0>();
    const int end = min(weight_vectors, (phase + 1) * per_phase);
    for (int i = phase * per_phase + static_cast<int>(threadIdx.x); i < end; i += kThreads) {
      copy_weight(i);
    }
    cp_async_commit();
  }
  uint4 scale[kRows];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    scale[i] = __ldg(reinterpret_cast<const uint4*>(p.norm_weight) + lane + 32 * i);
  }
  wait_for_prior_kernels();

  // x, normalized as rms_norm rounds it; every warp the whole row.
  float x[kRows][kElemsPerVector];
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    unpack8<T>(reinterpret_cast<const uint4*>(p.x)[lane + 32 * i], x[i]);
#pragma unroll
    for (int e = 0; e < kElemsPerVector; ++e) squares += x[i][e] * x[i][e];
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    squares += __shfl_xor_sync(0xffffffffu, squares, offset);
  }
  const float inv_rms = inverse_rms(squares, kHidden, p.eps);
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    float w[kElemsPerVector];
    unpack8<T>(scale[i], w);
#pragma unroll
    for (int e = 0; e < kElemsPerVector; ++e) {
      x[i][e] = round_to<T>(rms_normalize<T>(x[i][e], inv_rms, w[e]));
    }
  }

  NVLLM_TIMELINE_MARK(0);  // x normalized
  cp_async_wait<0>();
  __syncthreads();  // every thread's weight copies have landed
  NVLLM_TIMELINE_MARK(1);
  // Warp w takes gate/up rows w, w + kWarps, ..., all at once, so that their loads, products
  // and reductions overlap rather than follow each other (batch-1 +1.9%); each sum is rounded
  // as linear rounds gate_up. Rows past 2 count (a last CTA with fewer columns) are left out.
  float sum[kRowsPerWarp];
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    const int r = warp + j * kWarps;
    const uint4* row = gate_up + min(r, 2 * count - 1) * kRowVectors;
    sum[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      float w[kElemsPerVector];
      unpack8<T>(row[lane + 32 * i], w);
      sum[j] += dot8(x[i], w);
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) sum[j] += __shfl_xor_sync(0xffffffffu, sum[j], offset);
  }
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) {
      const int r = warp + j * kWarps;
      if (r < 2 * count) sums[r] = round_to<T>(sum[j]);
    }
  }
  __syncthreads();
  if (threadIdx.x < kColumns) {  // past count: 0, against down's zeros
    act[threadIdx.x] =
        threadIdx.x < count
            ? round_to<T>(silu_times<T>(sums[threadIdx.x], sums[count + threadIdx.x]))
            : 0.0f;
  }
  __syncthreads();
  NVLLM_TIMELINE_MARK(2);  // SiLU * up of the CTA's columns
  float a[kSliceVectors][kElemsPerVector];
#pragma unroll
  for (int v = 0; v < kSliceVectors; ++v) {
#pragma unroll
    for (int e = 0; e < kElemsPerVector; ++e) a[v][e] = act[v * kElemsPerVector + e];
  }
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int row = static_cast<int>(threadIdx.x) + i * kThreads;
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kSliceVectors; ++v) {
      float w[kElemsPerVector];
      unpack8<T>(down[row * kSliceVectors + v], w);
      sum += dot8(a[v], w);
    }
    add_fixed_point(p.pending + row, sum);
  }
}

template <typename T, int kRows>
void launch_mlp(const RmsNormMlpArgs& args, cudaStream_t stream) {
  const auto kernel = rms_norm_mlp_kernel<T, kRows>;
  // Half an SM's shared memory at least: the next layer's qkv_proj CTAs then start on SMs that
  // the MLP has left rather than beside two of its CTAs (96 -> 113 KB for Qwen3-0.6B: batch-1
  // +1.5%; 120 KB, one CTA an SM: -16%).
  const size_t smem = half_sm_shared_memory(smem_bytes(args.hidden));
  if (smem > size_t{48} << 10) {
    NVLLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
  }
  const MlpParams<T> params{static_cast<const T*>(args.x),
                            static_cast<const T*>(args.norm_weight),
                            args.eps,
                            static_cast<const T*>(args.gate_up),
                            args.ld_gate_up,
                            static_cast<const T*>(args.down),
                            args.ld_down,
                            args.pending,
                            static_cast<int>(args.intermediate)};
  const auto ctas = static_cast<unsigned>((args.intermediate + kColumns - 1) / kColumns);
  launch_kernel(kernel, ctas, kThreads, smem, stream, params);
}

template <typename T>
void launch_for_width(const RmsNormMlpArgs& args, cudaStream_t stream) {
  switch (args.hidden / kThreads) {
    case 1:
      return launch_mlp<T, 1>(args, stream);
    case 2:
      return launch_mlp<T, 2>(args, stream);
    default:
      return launch_mlp<T, 4>(args, stream);
  }
}

template <typename T>
__global__ void fold_pending_kernel(T* residual, int64_t* pending, int width) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < width;
       i += static_cast<int>(gridDim.x * blockDim.x)) {
    residual[i] = from_float<T>(to_float(residual[i]) + from_fixed_point(pending[i]));
    pending[i] = 0;
  }
}

}  // namespace

bool rms_norm_mlp_serves(DType dtype, int64_t hidden, int64_t intermediate, int num_sms) {
  const bool width_ok = hidden == kThreads || hidden == 2 * kThreads || hidden == 4 * kThreads;
  const int64_t ctas = (intermediate + kColumns - 1) / kColumns;
  return (dtype == DType::kBF16 || dtype == DType::kF16) && width_ok && intermediate > 0 &&
         intermediate % kElemsPerVector == 0 && num_sms > 0 && ctas <= kMaxCtasPerSm * num_sms;
}

void rms_norm_mlp(const RmsNormMlpArgs& args, cudaStream_t stream) {
  NVLLM_CHECK_MSG(rms_norm_mlp_serves(args.dtype, args.hidden, args.intermediate, args.num_sms),
                  "rms_norm_mlp: {} x {} ({}) is not served", args.hidden, args.intermediate,
                  dtype_name(args.dtype));
  NVLLM_CHECK_MSG(aligned_to(args.x, 16) && aligned_to(args.norm_weight, 16) &&
                      aligned_to(args.gate_up, 16) && aligned_to(args.down, 16) &&
                      args.ld_gate_up % kElemsPerVector == 0 &&
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
