// out [m, n] = x [m, k] @ weight [n, k]^T for m <= 8 on tensor cores, reading the weight once.
//
// A CTA owns a tile of 8 weight rows and its warps split k. Lane (g = lane / 4, t = lane % 4)
// copies 16-byte vectors (8 consecutive k) of weight row g and of x row g into shared memory
// with cp.async, kVectorsPerStep of each at once, so a CTA has up to 64 KB of the weight in
// flight whatever the compiler's scheduling; the 4 lanes of a row read 64 contiguous bytes.
// With the norm at one row (qkv_proj in decode), x is staged for that row only: a CTA then
// takes about half the shared memory (19 instead of 35 KB for Qwen3-0.6B's qkv_proj), so more
// of them fit beside the MLP kernel's CTAs and stream their weight in early (batch-1 +2.3%).
// Each lane reads back only its own vectors, so a wait on its own copies is all the sync needed.
// One m16n8k16 MMA takes x rows as A rows 0..7 (rows m..15 zero) and the tile's weight rows as
// B columns. An MMA sums over its 16 k slots, so any assignment of physical k to slots works
// when x and weight share it: lane t's slots 2t, 2t+1, 2t+8, 2t+9 hold elements 0..3 of its
// vector in one MMA and elements 4..7 in the next, for x (A) and the weight (B) alike. The
// warps' partial sums meet in shared memory and are added in a fixed order (deterministic).
//
// The op before or after a decode GEMV can ride along, saving a kernel and its round trip:
// - the RMS norm of x: the CTA holds all of each x row, so the warps' sums of squares meet in
//   shared memory (one barrier) and the staged vectors are normalized before the MMAs;
// - SiLU * up: the gate and the up vectors are both staged and multiplied before the MMAs;
// - the residual add: each output is rounded, added to the residual read right after the
//   wait, and written back over it.
//
// Weights of many tiles take gemv_persistent.cu's persistent kernel instead
// (gemv_persistent_serves).
#include "kernels/cuda/linear/gemv.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/device/elementwise_math.cuh"
#include "kernels/cuda/device/l2_hints.cuh"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/linear/fixed_point.cuh"
#include "kernels/cuda/linear/gemv_common.cuh"
#include "kernels/cuda/linear/gemv_persistent.h"
#include "kernels/cuda/linear/mma_top_rows.cuh"
#include "kernels/cuda/runtime/alignment.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

using namespace gemv_detail;

// Waits for all of this thread's cp.async copies.
__device__ __forceinline__ void wait_copies() {
  asm volatile(
      "cp.async.commit_group;\n"
      "cp.async.wait_group 0;\n" ::
          : "memory");
}

// x vectors a step stages for each i: those of one row, or of all kTileRows rows.
template <bool kOneRow>
constexpr int kXLanes = (kOneRow ? 1 : kTileRows) * kLanesPerRow;
// x's, and with kSiluGate up's, vectors of a step.
template <Input kInput, bool kOneRow>
constexpr int kXVectors = (kInput == Input::kSiluGate ? 2 : 1) *
                          (kVectorsPerStep * kXLanes<kOneRow>);

// Shared memory of a warp: kVectorsPerStep vectors per lane of the weight [i][lane], then
// kVectorsPerStep * kXLanes of x [i][row][t] (of the gate with kSiluGate), then as many of the
// up rows (kSiluGate) or 32 of norm_weight (kRmsNorm: the vector each lane transforms). After
// the warps: the partial sums [warp][x row][tile row] and the sums of squares [warp][x row].
template <Input kInput, bool kOneRow>
constexpr int kWarpVectors = kVectorsPerStep * 32 + kXVectors<kInput, kOneRow> +
                             (kInput == Input::kRmsNorm ? 32 : 0);
template <Input kInput, bool kOneRow>
constexpr size_t kWarpSmemBytes = kWarpVectors<kInput, kOneRow> * sizeof(uint4) +
                                  (kTileRows * kTileRows + kTileRows) * sizeof(float);

// Grid: one CTA per tile of kTileRows weight rows; block: 1..kMaxWarps warps splitting k (all
// of k in one step with kRmsNorm); dynamic shared memory: warps * kWarpSmemBytes<kInput,
// kOneRow>; kOneRow: m == 1, and x is staged for that row only.
template <typename T, typename OutT, Input kInput, bool kAddResidual, bool kOneRow>
__global__ void __launch_bounds__(kMaxWarps * 32) gemv_kernel(const GemvParams<T, OutT> p) {
  NVLLM_TIMELINE_SCOPE();
  constexpr int kVectors = kWarpVectors<kInput, kOneRow>;
  constexpr int x_lanes = kXLanes<kOneRow>;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  const int m = kOneRow ? 1 : p.m;
  const int64_t n = p.n;
  extern __shared__ uint4 staging[];
  auto* partial = reinterpret_cast<float(*)[kTileRows][kTileRows]>(staging + warps * kVectors);
  float(*row_squares)[kTileRows] = reinterpret_cast<float(*)[kTileRows]>(partial + warps);
  const int g = lane / kLanesPerRow;  // x row and tile row of this lane
  const int t = lane % kLanesPerRow;  // its vector within each group of 4
  const int64_t tile_first = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const bool weight_row_valid = tile_first + g < n;
  const bool x_row_valid = g < m;
  const T* weight_row = p.weight + (weight_row_valid ? (tile_first + g) * p.ldw : 0);  // [k]
  const T* x_row = p.x + (x_row_valid ? g * p.ldx : 0);     // [k] (the gate with kSiluGate)
  const int64_t vectors = p.k / kElemsPerVector;            // of a row
  uint4* staged_weight = staging + warp * kVectors + lane;  // stride 32
  // Lane (g, t)'s x and up vectors (g < m) sit at slot g * kLanesPerRow + t = lane of each i.
  uint4* staged_x = staged_weight + kVectorsPerStep * 32;                   // stride x_lanes
  uint4* staged_x_warp = staging + warp * kVectors + kVectorsPerStep * 32;  // [i][row][t]
  uint4* staged_up_warp = staged_x_warp + kVectorsPerStep * x_lanes;        // kSiluGate
  uint4* staged_up = staged_up_warp + lane;
  uint4* staged_norm =
      staging + warp * kVectors + kVectorsPerStep * (32 + x_lanes) + lane;  // kRmsNorm

  // With kRmsNorm and a pending sum: the sum under the vector this lane transforms (one step
  // covers the row), read right after the wait.
  long long pending_in[kElemsPerVector] = {};

  // Replaces the staged x vectors of the valid rows by the input the MMAs take. The MMA layout
  // spreads a row over 4 lanes; here the whole warp shares the work instead: lane L takes
  // vector (i, t) = (L / 4, L % 4) of every row, so at one row each lane converts 8 elements,
  // not 64 (the instruction count, not memory, is what this costs). Rows past m stay zero.
  const auto transform_input = [&](uint4* x_vectors, const uint4* up_vectors) {
    __syncwarp();  // every lane's copies have landed (each waited for its own)
    const int own = (lane / kLanesPerRow) * x_lanes + lane % kLanesPerRow;  // slot of row 0
    if constexpr (kInput == Input::kRmsNorm) {
      // One step covers the row (gemv_supported), so the CTA holds all of it: the lanes' sums
      // of squares meet across the warp, then across the warps, in a fixed order.
      for (int r = 0; r < m; ++r) {
        float values[kElemsPerVector];
        unpack8<T>(x_vectors[own + r * kLanesPerRow], values);
        if (p.pending != nullptr) {  // one row: the residual stream is x + pending
#pragma unroll
          for (int e = 0; e < kElemsPerVector; ++e) {
            values[e] = round_to<T>(values[e] + from_fixed_point(pending_in[e]));
          }
          x_vectors[own] = pack8<T>(values);
        }
        float squares = 0.0f;
#pragma unroll
        for (int e = 0; e < kElemsPerVector; ++e) squares += values[e] * values[e];
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) {
          squares += __shfl_xor_sync(0xffffffffu, squares, offset);
        }
        if (lane == 0) row_squares[warp][r] = squares;
      }
      __syncthreads();
      float scale[kElemsPerVector];
      unpack8<T>(*staged_norm, scale);
      for (int r = 0; r < m; ++r) {
        float row_sum = 0.0f;
        for (int w = 0; w < warps; ++w) row_sum += row_squares[w][r];
        const float inv_rms = inverse_rms(row_sum, p.k, p.eps);
        float values[kElemsPerVector];
        unpack8<T>(x_vectors[own + r * kLanesPerRow], values);
#pragma unroll
        for (int e = 0; e < kElemsPerVector; ++e) {
          values[e] = rms_normalize<T>(values[e], inv_rms, scale[e]);
        }
        x_vectors[own + r * kLanesPerRow] = pack8<T>(values);
      }
    } else {
      for (int r = 0; r < m; ++r) {
        float gate[kElemsPerVector], up[kElemsPerVector];
        unpack8<T>(x_vectors[own + r * kLanesPerRow], gate);
        unpack8<T>(up_vectors[own + r * kLanesPerRow], up);
#pragma unroll
        for (int e = 0; e < kElemsPerVector; ++e) gate[e] = silu_times<T>(gate[e], up[e]);
        x_vectors[own + r * kLanesPerRow] = pack8<T>(gate);
      }
    }
    __syncwarp();
  };

  // c[0..1]: out (x row g, tile rows 2t and 2t + 1); c[2..3] stay zero (A rows 8..15).
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  // A step covers vectors [first, first + kStepVectors) of the rows: lane t takes t, t + 4, ...
  const uint64_t weight_policy = l2_evict_first_policy();
  const auto copy_weight_step = [&](int64_t first) {
#pragma unroll
    for (int i = 0; i < kVectorsPerStep; ++i) {
      const int64_t v = first + i * kLanesPerRow + t;
      const bool valid = weight_row_valid && v < vectors;
      copy_weight_async(staged_weight + i * 32, weight_row + (valid ? v * kElemsPerVector : 0),
                        valid, weight_policy);
    }
  };
  // The step's x vectors (and up vectors with kSiluGate); rows past m are zero-filled, except
  // with kOneRow, where only row 0 is staged.
  const auto copy_x_step = [&](int64_t first) {
    if (kOneRow && !x_row_valid) return;
#pragma unroll
    for (int i = 0; i < kVectorsPerStep; ++i) {
      const int64_t v = first + i * kLanesPerRow + t;
      const bool valid = x_row_valid && v < vectors;
      const int64_t offset = valid ? v * kElemsPerVector : 0;
      copy_x_async(staged_x + i * x_lanes, x_row + offset, valid);
      if constexpr (kInput == Input::kSiluGate) {
        copy_x_async(staged_up + i * x_lanes, x_row + p.k + offset, valid);
      }
    }
  };
  // The weight and norm_weight are no earlier kernel's output: the first step's copies go out
  // while the kernel before this one finishes (launch.cuh); x, residual and out wait for it.
  // Right after the wait x's copies go out first, so that their round trip overlaps the reads
  // of the pending sum and the residual rather than following them.
  const int64_t first_step = static_cast<int64_t>(warp) * kStepVectors;
  allow_next_kernel_launch();
  copy_weight_step(first_step);
  if constexpr (kInput == Input::kRmsNorm) {
    const int64_t v = first_step + lane;  // the vector this lane transforms (see below)
    copy_x_async(staged_norm, p.norm_weight + (v < vectors ? v * kElemsPerVector : 0), v < vectors);
  }
  // The bias under this thread's outputs (the epilogue's entries e = threadIdx.x + j *
  // blockDim.x): a weight, read before the wait too.
  float bias_in[2] = {0.0f, 0.0f};
  if (p.bias != nullptr) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int e = static_cast<int>(threadIdx.x + j * blockDim.x);
      const int col = e % kTileRows;
      if (e < kTileRows * kTileRows && tile_first + col < n) {
        bias_in[j] = to_float(p.bias[tile_first + col]);
      }
    }
  }
  wait_for_prior_kernels();
  copy_x_step(first_step);
  if constexpr (kInput == Input::kRmsNorm) {  // pending_in
    const int64_t v = first_step + lane;
    if (p.pending != nullptr && v < vectors) {
      const auto* source = reinterpret_cast<const longlong2*>(p.pending + v * kElemsPerVector);
#pragma unroll
      for (int i = 0; i < kElemsPerVector / 2; ++i) {
        const longlong2 pair = source[i];
        pending_in[2 * i] = pair.x;
        pending_in[2 * i + 1] = pair.y;
      }
    }
  }
  // The residual under this thread's outputs (the epilogue's entries e = threadIdx.x + j *
  // blockDim.x), read now so that its latency overlaps the loop's.
  float residual_in[2] = {0.0f, 0.0f};
  if constexpr (kAddResidual) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int e = static_cast<int>(threadIdx.x + j * blockDim.x);
      const int row = e / kTileRows;
      const int col = e % kTileRows;
      if (e < kTileRows * kTileRows && row < m && tile_first + col < n) {
        residual_in[j] = to_float(p.residual[row * p.ldr + tile_first + col]);
        if (p.pending != nullptr) {  // one row: fold the pending sum in, and clear it
          int64_t& pending = p.pending[tile_first + col];
          residual_in[j] = round_to<T>(residual_in[j] + from_fixed_point(pending));
          pending = 0;
        }
      }
    }
  }
  for (int64_t first = first_step; first < vectors;
       first += static_cast<int64_t>(warps) * kStepVectors) {
    if (first != first_step) {
      copy_weight_step(first);
      copy_x_step(first);
    }
    wait_copies();
    NVLLM_TIMELINE_MARK(0);  // (the last step's) weight and x landed
    if constexpr (kInput != Input::kX) transform_input(staged_x_warp, staged_up_warp);
    NVLLM_TIMELINE_MARK(1);
#pragma unroll
    for (int i = 0; i < kVectorsPerStep; ++i) {
      const uint4 a = !kOneRow || x_row_valid ? staged_x[i * x_lanes] : make_uint4(0, 0, 0, 0);
      const uint4 w = staged_weight[i * 32];
      mma_top_rows<T>(c, a.x, a.y, w.x, w.y);  // elements 0..3
      mma_top_rows<T>(c, a.z, a.w, w.z, w.w);  // elements 4..7
    }
  }

  NVLLM_TIMELINE_MARK(2);  // MMAs done
  *reinterpret_cast<float2*>(&partial[warp][g][2 * t]) = make_float2(c[0], c[1]);
  __syncthreads();
  // A block may have a single warp (short k): it then sums two entries per thread.
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int e = static_cast<int>(threadIdx.x + j * blockDim.x);
    const int row = e / kTileRows;  // of x and out
    const int col = e % kTileRows;  // within the tile
    if (e < kTileRows * kTileRows && row < m && tile_first + col < n) {
      // Unrolled over kMaxWarps, so that the warps' sums are read at once.
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kMaxWarps; ++w) {
        if (w < warps) sum += partial[w][row][col];
      }
      if constexpr (kAddResidual) {
        sum = round_to<T>(sum) + residual_in[j];
      } else {
        sum += bias_in[j];
      }
      p.out[row * p.ldo + tile_first + col] = from_float<OutT>(sum);
    }
  }
}

template <typename T, typename OutT, Input kInput, bool kAddResidual, bool kOneRow>
void launch_rows(const GemvArgs& args, int64_t tiles, int warps, cudaStream_t stream) {
  const auto kernel = gemv_kernel<T, OutT, kInput, kAddResidual, kOneRow>;
  const size_t smem = warps * kWarpSmemBytes<kInput, kOneRow>;
  if (smem > size_t{48} << 10) {
    // Above the default limit; one value for every launch, so the call is idempotent.
    NVLLM_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kMaxWarps * kWarpSmemBytes<kInput, kOneRow>)));
  }
  const GemvParams<T, OutT> params = gemv_params<T, OutT>(args);
  launch_kernel(kernel, static_cast<unsigned>(tiles), warps * 32, smem, stream, params);
}

// At one row only the norm's kind stages x for that row alone (see the top of the file): o_proj
// (the residual add) keeps its larger CTAs, which hold back the MLP kernel's CTAs while
// attention runs, as attention needs (compact there: batch-1 -12%, docs/BENCHMARKS.md).
template <typename T, typename OutT, Input kInput, bool kAddResidual>
struct TileLaunch {
  static void run(const GemvArgs& args, int64_t tiles, int warps, cudaStream_t stream) {
    if constexpr (kInput == Input::kRmsNorm) {
      if (args.m == 1) {
        return launch_rows<T, OutT, kInput, kAddResidual, true>(args, tiles, warps, stream);
      }
    }
    launch_rows<T, OutT, kInput, kAddResidual, false>(args, tiles, warps, stream);
  }
};

}  // namespace

namespace gemv_detail {

bool gemv_operands_supported(const GemvArgs& args) {
  const bool half_inputs = args.in_dtype == DType::kBF16 || args.in_dtype == DType::kF16;
  const bool out_ok = args.out_dtype == args.in_dtype || args.out_dtype == DType::kF32;
  // A stride matters only where there is a second row to reach.
  const bool x_stride_ok = args.m == 1 || args.ldx % kElemsPerVector == 0;
  const bool weight_stride_ok = args.n == 1 || args.ldw % kElemsPerVector == 0;
  const bool shape_ok = args.m >= 1 && args.m <= kGemvMaxRows && args.n >= 1 && args.k > 0 &&
                        args.k % kElemsPerVector == 0;
  const bool norm_ok =
      args.norm_weight == nullptr || (!args.silu_gate && aligned_to(args.norm_weight, 16));
  // The kernels there are (dispatch_gemv): SiLU only into the input dtype, the residual add only
  // after a plain or SiLU-gated input.
  const bool silu_ok = !args.silu_gate ||
                       ((args.m == 1 || args.ldx >= 2 * args.k) && args.out_dtype == args.in_dtype);
  const bool residual_ok =
      args.residual == nullptr ||
      (args.out_dtype == args.in_dtype && args.norm_weight == nullptr && args.bias == nullptr);
  // The pending sum goes with one row, and with the norm or the residual add (not SiLU).
  const bool pending_ok =
      args.pending == nullptr ||
      (args.m == 1 && !args.silu_gate &&
       (args.norm_weight != nullptr || args.residual != nullptr) && aligned_to(args.pending, 16));
  return half_inputs && out_ok && shape_ok && aligned_to(args.x, 16) &&
         aligned_to(args.weight, 16) && x_stride_ok && weight_stride_ok && norm_ok && silu_ok &&
         residual_ok && pending_ok;
}

}  // namespace gemv_detail

bool gemv_supported(const GemvArgs& args) {
  return gemv_operands_supported(args) &&
         (args.norm_weight == nullptr || args.k <= kGemvMaxNormWidth ||
          gemv_persistent_serves(args));
}

void gemv(const GemvArgs& args, cudaStream_t stream) {
  NVLLM_CHECK_MSG(gemv_supported(args), "gemv: unsupported operands ({}x{}x{}, {} -> {})", args.m,
                  args.n, args.k, dtype_name(args.in_dtype), dtype_name(args.out_dtype));
  if (gemv_persistent_serves(args)) return gemv_persistent(args, stream);
  const int64_t tiles = (args.n + kTileRows - 1) / kTileRows;
  NVLLM_CHECK_LE(tiles, int64_t{INT32_MAX});
  // Enough warps that each lane's loads fit in one step where k allows it, so a CTA has its
  // whole share of the weight in flight at once.
  const int64_t vectors = args.k / kElemsPerVector;
  const int warps =
      static_cast<int>(std::min<int64_t>(kMaxWarps, (vectors + kStepVectors - 1) / kStepVectors));
  dispatch_gemv<TileLaunch>(args, tiles, warps, stream);
}

}  // namespace nanovllm::cuda
