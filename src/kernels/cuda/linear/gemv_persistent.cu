// out [m, n] = x [m, k] @ weight [n, k]^T for m <= 8 with persistent CTAs: CTA b takes the
// tiles of 8 weight rows b, b + gridDim.x, ..., one after another, and each warp streams its
// share of every tile through a ring of two stages, so its next copies are in flight while it
// multiplies and while the CTA sums a tile. The kernel of a CTA a tile (gemv.cu) stops streaming
// between its CTAs: with a large weight each SM holds one of them at a time, which loads its
// share, waits, multiplies, sums and exits before the next one starts loading (63 to 86% of the
// copy bandwidth at one row for the 8B shape's linears; this kernel 81 to 96%,
// docs/BENCHMARKS.md).
//
// A tile's k is split over the warps as in gemv.cu (kStepVectors vectors of each row a warp and
// step, the MMA of mma_top_rows.cuh with x row g in A row g, the warps' sums added in a fixed
// order: deterministic, and a row's sums the same whatever the other rows); where one step
// covers k (up to 4,096) the two kernels give the same bits. The input rows are staged once per
// CTA and read by every tile; with the norm or SiLU (one row) the row is transformed once.
#include "kernels/cuda/linear/gemv_persistent.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/device/elementwise_math.cuh"
#include "kernels/cuda/device/l2_hints.cuh"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/linear/gemv_common.cuh"
#include "kernels/cuda/linear/mma_top_rows.cuh"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

using namespace gemv_detail;

constexpr int kRingStages = 2;
constexpr int kRingWarpVectors = kVectorsPerStep * 32;  // a warp's share of a stage

__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most the newest committed group of this thread's copies is in flight.
__device__ __forceinline__ void wait_copies_but_newest() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

// Rows of the staged input start input_stride() vectors apart: a multiple of 8 (the 32 banks)
// plus 4, so that the two rows a quarter-warp reads at the same k sit in different banks.
__host__ __device__ constexpr int64_t input_stride(int64_t vectors) {
  return (vectors + 7) / 8 * 8 + kLanesPerRow;
}
// The staged rows: x's m, or with a norm or SiLU (one row) x and norm_weight or up.
int input_rows(const GemvArgs& args) {
  return args.silu_gate || args.norm_weight != nullptr ? 2 : static_cast<int>(args.m);
}

// Shared memory: the ring [stage][warp][i][lane], the input rows [input_rows][input_stride],
// then the warps' sums [2][warp][x row][tile row] (a tile's in one half while the last tile's
// may still be read from the other) and [warp] sums of squares.
size_t smem_bytes(int warps, int64_t vectors, int rows) {
  return static_cast<size_t>(int64_t{kRingStages} * warps * kRingWarpVectors +
                             rows * input_stride(vectors)) *
             sizeof(uint4) +
         static_cast<size_t>(2 * warps * kTileRows * kTileRows + warps) * sizeof(float);
}

// Below this many warps a CTA has too few copies in flight to stream its SM's share.
constexpr int kMinWarps = 8;

// The split of k: `warps` warps (at most kMaxWarps), each taking kStepVectors vectors of a row
// per step, `steps` steps a tile, with as few warps as keep every step's warps busy (k 5,120:
// 10 warps twice rather than 16 and then 4); gemv.cu's count where one step covers k. Where
// the input rows and that many warps' ring do not fit in `smem_limit`, fewer warps take more
// steps (down to kMinWarps; warps 0 where even those do not fit). The split sets the order of
// a row's sums, so a row's bits match that row alone only where both take the same split.
struct KSplit {
  int warps;
  int steps;
  size_t smem;
  bool smaller_ring;  // fewer warps than the split of one row: x's rows took their room
};
KSplit k_split(const GemvArgs& args, size_t smem_limit) {
  const int64_t vectors = args.k / kElemsPerVector;
  const int64_t warp_steps = (vectors + kStepVectors - 1) / kStepVectors;
  const int64_t one_row_steps = (warp_steps + kMaxWarps - 1) / kMaxWarps;
  for (int64_t steps = one_row_steps;; ++steps) {
    const auto warps = static_cast<int>((warp_steps + steps - 1) / steps);
    if (warps < kMinWarps) return {0, 0, 0, false};
    const size_t smem = smem_bytes(warps, vectors, input_rows(args));
    if (smem <= smem_limit) return {warps, static_cast<int>(steps), smem, steps > one_row_steps};
  }
}
int device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&device));
  NVLLM_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}
size_t smem_optin() {
  return static_cast<size_t>(device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin));
}

// The least share of its rounds' CTA slots a smaller ring's tiles must fill. Such a CTA takes
// most of an SM's shared memory, one an SM; in a last round that leaves SMs idle, the busy ones
// would each have to pull more than their share, which a smaller ring has too few copies in
// flight for (Qwen2.5-7B's down_proj at 3 and 4 rows, 448 tiles on 132 SMs: 85% of the slots,
// 82 and 75% of copy against cuBLASLt's 86%; the 8B to 32B shapes' at 97% stream at 85 to 91%).
constexpr double kSmallerRingMinFill = 0.9;

bool smaller_ring_fills_its_rounds(const GemvArgs& args) {
  const int64_t tiles = (args.n + kTileRows - 1) / kTileRows;
  const int64_t sms = device_attribute(cudaDevAttrMultiProcessorCount);
  const int64_t rounds = (tiles + sms - 1) / sms;
  return tiles <= sms || static_cast<double>(tiles) >= kSmallerRingMinFill * rounds * sms;
}

// Grid: at most one CTA a tile; block: warps * 32 threads (k_split: kMinWarps to kMaxWarps).
template <typename T, typename OutT, Input kInput, bool kAddResidual>
__global__ void __launch_bounds__(kMaxWarps * 32)
    gemv_persistent_kernel(const GemvParams<T, OutT> p, int steps) {
  NVLLM_TIMELINE_SCOPE();
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  const int threads = static_cast<int>(blockDim.x);
  const int m = kInput == Input::kX ? p.m : 1;
  const int64_t n = p.n;
  const int64_t vectors = p.k / kElemsPerVector;
  const int64_t stride = input_stride(vectors);
  const int64_t tiles = (n + kTileRows - 1) / kTileRows;
  const int64_t my_tiles = (tiles - 1 - blockIdx.x) / gridDim.x + 1;
  const int64_t items = my_tiles * steps;  // (tile, step) pairs, tile by tile
  extern __shared__ uint4 staging[];
  uint4* ring = staging;
  uint4* input = ring + int64_t{kRingStages} * warps * kRingWarpVectors;  // [m][stride]
  uint4* second = input + stride;  // [vectors]: up or norm_weight (m == 1)
  auto* partial = reinterpret_cast<float*>(input + (kInput == Input::kX ? m : 2) * stride);
  float* row_squares = partial + 2 * warps * kTileRows * kTileRows;
  const int g = lane / kLanesPerRow;  // tile row of this lane, and x row (A row)
  const int t = lane % kLanesPerRow;
  const uint64_t weight_policy = l2_evict_first_policy();
  const auto tile_first = [&](int64_t j) {  // first weight row of this CTA's j-th tile
    return (static_cast<int64_t>(blockIdx.x) + j * gridDim.x) * kTileRows;
  };
  const auto step_first = [&](int64_t q) {  // item q's first vector for this warp
    return (q % steps * warps + warp) * kStepVectors;
  };
  const auto stage = [&](int64_t q) {  // this lane's slots of item q's stage
    return ring + (q % kRingStages * warps + warp) * kRingWarpVectors + lane;
  };
  // Item q's weight copies, then a commit (an empty group past the last item, so that every
  // iteration waits for the same count).
  const auto copy_item = [&](int64_t q) {
    if (q < items) {
      uint4* dst = stage(q);
      const int64_t row = tile_first(q / steps) + g;
      const bool row_valid = row < n;
      const T* weight_row = p.weight + (row_valid ? row * p.ldw : 0);
      const int64_t first = step_first(q);
#pragma unroll
      for (int i = 0; i < kVectorsPerStep; ++i) {
        const int64_t v = first + i * kLanesPerRow + t;
        const bool valid = row_valid && v < vectors;
        copy_weight_async(dst + i * 32, weight_row + (valid ? v * kElemsPerVector : 0), valid,
                          weight_policy);
      }
    }
    commit_copies();
  };
  // Thread e < m * kTileRows sums out (row e / kTileRows, column e % kTileRows of a tile).
  const int out_row = static_cast<int>(threadIdx.x) / kTileRows;
  const int out_col = static_cast<int>(threadIdx.x) % kTileRows;
  const bool sums_out = out_row < m;
  // What that thread adds in tile j: the residual or the bias. Read a tile ahead, so that the
  // sum does not wait for it.
  const auto addend = [&](int64_t j) {
    const int64_t col = tile_first(j) + out_col;
    if (!sums_out || j >= my_tiles || col >= n) return 0.0f;
    if constexpr (kAddResidual) return to_float(p.residual[out_row * p.ldr + col]);
    return p.bias != nullptr ? to_float(p.bias[col]) : 0.0f;
  };

  // The weight and norm_weight are no earlier kernel's output: their copies go out before the
  // wait (launch.cuh); x and the residual after it.
  allow_next_kernel_launch();
  copy_item(0);
  if constexpr (kInput == Input::kRmsNorm) {
    for (int64_t v = threadIdx.x; v < vectors; v += threads) {
      copy_x_async(second + v, p.norm_weight + v * kElemsPerVector, true);
    }
  }
  wait_for_prior_kernels();
  for (int r = 0; r < m; ++r) {
    for (int64_t v = threadIdx.x; v < vectors; v += threads) {
      copy_x_async(input + r * stride + v, p.x + r * p.ldx + v * kElemsPerVector, true);
    }
  }
  if constexpr (kInput == Input::kSiluGate) {  // up, beside the gate of the one row
    for (int64_t v = threadIdx.x; v < vectors; v += threads) {
      copy_x_async(second + v, p.x + p.k + v * kElemsPerVector, true);
    }
  }
  commit_copies();
  float next_addend = addend(0);
  copy_item(1);
  wait_copies_but_newest();  // item 0 and the input row have landed
  __syncthreads();
  if constexpr (kInput == Input::kRmsNorm) {
    // Each thread's squares, then the warp's and the warps' in order: at one vector a thread
    // (k up to 4,096) the sum gemv.cu takes.
    float squares = 0.0f;
    for (int64_t v = threadIdx.x; v < vectors; v += threads) {
      float values[kElemsPerVector];
      unpack8<T>(input[v], values);
#pragma unroll
      for (int e = 0; e < kElemsPerVector; ++e) squares += values[e] * values[e];
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      squares += __shfl_xor_sync(0xffffffffu, squares, offset);
    }
    if (lane == 0) row_squares[warp] = squares;
    __syncthreads();
    float row_sum = 0.0f;
    for (int w = 0; w < warps; ++w) row_sum += row_squares[w];
    const float inv_rms = inverse_rms(row_sum, p.k, p.eps);
    for (int64_t v = threadIdx.x; v < vectors; v += threads) {
      float values[kElemsPerVector], scale[kElemsPerVector];
      unpack8<T>(input[v], values);
      unpack8<T>(second[v], scale);
#pragma unroll
      for (int e = 0; e < kElemsPerVector; ++e) {
        values[e] = rms_normalize<T>(values[e], inv_rms, scale[e]);
      }
      input[v] = pack8<T>(values);
    }
    __syncthreads();
  } else if constexpr (kInput == Input::kSiluGate) {
    for (int64_t v = threadIdx.x; v < vectors; v += threads) {
      float gate[kElemsPerVector], up[kElemsPerVector];
      unpack8<T>(input[v], gate);
      unpack8<T>(second[v], up);
#pragma unroll
      for (int e = 0; e < kElemsPerVector; ++e) gate[e] = silu_times<T>(gate[e], up[e]);
      input[v] = pack8<T>(gate);
    }
    __syncthreads();
  }

  // c[0..1]: out (x row g, tile rows 2t, 2t + 1) in lanes g < m; the other A rows are zero.
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const bool x_row_valid = g < m;
  const uint4* x_row = input + (x_row_valid ? g : 0) * stride;
  for (int64_t q = 0; q < items; ++q) {
    wait_copies_but_newest();  // item q has landed; each lane reads only its own copies
    const uint4* staged = stage(q);
    const int64_t first = step_first(q);
#pragma unroll
    for (int i = 0; i < kVectorsPerStep; ++i) {
      const int64_t v = first + i * kLanesPerRow + t;
      const uint4 a = x_row_valid && v < vectors ? x_row[v] : make_uint4(0, 0, 0, 0);
      const uint4 w = staged[i * 32];
      mma_top_rows<T>(c, a.x, a.y, w.x, w.y);  // elements 0..3
      mma_top_rows<T>(c, a.z, a.w, w.z, w.w);  // elements 4..7
    }
    copy_item(q + kRingStages);  // into the slots just read
    if (q % steps != steps - 1) continue;
    const int64_t j = q / steps;  // the tile is done: its warps' sums meet
    float* sums = partial + j % 2 * warps * kTileRows * kTileRows;  // [warp][x row][tile row]
    if (x_row_valid) {
      *reinterpret_cast<float2*>(&sums[(warp * kTileRows + g) * kTileRows + 2 * t]) =
          make_float2(c[0], c[1]);
    }
    c[0] = c[1] = 0.0f;
    __syncthreads();
    if (sums_out) {
      const int64_t col = tile_first(j) + out_col;
      if (col < n) {
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < kMaxWarps; ++w) {
          if (w < warps) sum += sums[(w * kTileRows + out_row) * kTileRows + out_col];
        }
        if constexpr (kAddResidual) {
          sum = round_to<T>(sum) + next_addend;
        } else {
          sum += next_addend;
        }
        p.out[out_row * p.ldo + col] = from_float<OutT>(sum);
      }
      next_addend = addend(j + 1);
    }
  }
}

template <typename T, typename OutT, Input kInput, bool kAddResidual>
struct PersistentLaunch {
  static void run(const GemvArgs& args, cudaStream_t stream) {
    const auto kernel = gemv_persistent_kernel<T, OutT, kInput, kAddResidual>;
    const size_t optin = smem_optin();
    const KSplit split = k_split(args, optin);
    const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
    // One value for every launch, so the call is idempotent.
    NVLLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(optin)));
    int per_sm = 0;
    NVLLM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel,
                                                                   split.warps * 32, split.smem));
    const int64_t tiles = (args.n + kTileRows - 1) / kTileRows;
    const int64_t grid = std::min<int64_t>(tiles, int64_t{std::max(per_sm, 1)} * sms);
    launch_kernel(kernel, static_cast<unsigned>(grid), split.warps * 32, split.smem, stream,
                  gemv_params<T, OutT>(args), split.steps);
  }
};

}  // namespace

bool gemv_persistent_weight(const GemvArgs& args) {
  return args.k >= 2048 && args.n * args.k * 2 >= kGemvPersistentMinWeightBytes;
}

bool gemv_persistent_serves(const GemvArgs& args) {
  const bool transformed = args.silu_gate || args.norm_weight != nullptr;
  if (!gemv_operands_supported(args) || (transformed && args.m != 1) || args.pending != nullptr ||
      !gemv_persistent_weight(args)) {
    return false;
  }
  const KSplit split = k_split(args, smem_optin());
  return split.warps > 0 && (!split.smaller_ring || smaller_ring_fills_its_rounds(args));
}

void gemv_persistent(const GemvArgs& args, cudaStream_t stream) {
  NVLLM_CHECK_MSG(gemv_persistent_serves(args),
                  "gemv_persistent: unsupported operands ({}x{}x{}, {} -> {})", args.m, args.n,
                  args.k, dtype_name(args.in_dtype), dtype_name(args.out_dtype));
  dispatch_gemv<PersistentLaunch>(args, stream);
}

}  // namespace nanovllm::cuda
