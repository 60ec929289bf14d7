// The grouped GEMM of the experts (bf16/f16 on tensor cores, f32 accumulation), for the gate_up
// product with SiLU * up in its epilogue and for the down product with the routing weight in
// its epilogue. CTA (m, n) takes row tile m of moe_align's map, whose rows are pairs of one
// expert, and output columns [n * kBN, (n + 1) * kBN): for gate_up, the expert's gate rows and
// the matching up rows, so that each thread holds a column's gate and up sums together.
// Operands stream through a kStages-deep cp.async pipeline of kBK-deep slices (x rows gathered
// by pair); the weights' first stages are issued as soon as the tile's expert is known, for down
// before it waits for gate_up (launch.cuh). Warps split the tile's rows and columns, never the
// depth: every output is one chain of m16n8k16 MMAs over the depth in order, whatever the tile
// shape, so a row's bits do not depend on the batch it comes in.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "kernels/cuda/device/elementwise_math.cuh"
#include "kernels/cuda/device/l2_hints.cuh"
#include "kernels/cuda/device/tensor_core.cuh"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/moe/moe_scan.cuh"
#include "kernels/cuda/runtime/alignment.h"
#include "kernels/cuda/runtime/cuda_check.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda::moe {

template <typename T>
struct GemmParams {
  const T* a;  // gate_up: x [rows, k] (row pair / top_k); down: act [slots, k] (row = slot)
  int64_t a_stride;
  const T* weight;              // gate_up [experts, 2 n, k]; down [experts, n, k]
  const float* route_weights;   // down: [pairs]
  const int32_t* sorted_pairs;  // moe_align's map
  const int32_t* tile_experts;
  const int32_t* num_tiles;
  T* out;  // gate_up: act [slots, n]; down: weighted [pairs, n]
  int top_k;
  int n;  // output columns (a multiple of 8)
  int k;  // depth (a multiple of 8)
  int max_tiles;
  int n_tiles;
  // CTA order: the row tiles of a column tile in a row (decode), or the reverse. In the first
  // the tiles of an expert read its weights together, once a step: they leave L2 first.
  bool m_fastest;
};

template <int kBM_, int kBN_, int kBK_, int kWarpsM_, int kWarpsN_, int kStages_, int kMinCtas_>
struct TileShape {
  static constexpr int kBM = kBM_;  // rows (pairs) of a tile
  static constexpr int kBN = kBN_;  // output columns of a tile
  static constexpr int kBK = kBK_;  // depth of a pipeline stage
  static constexpr int kWarpsM = kWarpsM_;
  static constexpr int kWarpsN = kWarpsN_;
  static constexpr int kStages = kStages_;
  static constexpr int kMinCtas = kMinCtas_;  // CTAs an SM must fit (__launch_bounds__)
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  // A shared-memory row: kBK elements and 16 bytes of padding, so that the 8 rows one ldmatrix
  // reads start in 8 different 16-byte bank groups.
  static constexpr int kRowElems = kBK + 8;
};

template <class S, bool kGateUp>
constexpr int b_rows() {
  return kGateUp ? 2 * S::kBN : S::kBN;
}

template <class S, bool kGateUp>
constexpr size_t gemm_smem_bytes() {
  return static_cast<size_t>(S::kStages) * (S::kBM + b_rows<S, kGateUp>()) * S::kRowElems * 2;
}

// d += a @ b for m16n8k16 (tensor_core.cuh's fragment layouts), not volatile: the compiler may
// move the MMAs past the ldmatrix loads of the next step, which are.
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

template <typename T, class S, bool kGateUp>
__global__ void __launch_bounds__(S::kThreads, S::kMinCtas)
    grouped_gemm_kernel(const GemmParams<T> p) {
  NVLLM_TIMELINE_SCOPE();
  constexpr int kThreads = S::kThreads;
  constexpr int kBM = S::kBM;
  constexpr int kBN = S::kBN;
  constexpr int kBK = S::kBK;
  constexpr int kRow = S::kRowElems;
  constexpr int kBRows = b_rows<S, kGateUp>();
  constexpr int kWM = kBM / S::kWarpsM;  // rows of a warp
  constexpr int kWN = kBN / S::kWarpsN;  // output columns of a warp
  constexpr int kMSub = kWM / 16;
  constexpr int kHalfGroups = kWN / 8;  // n8 column groups of a warp (gate_up: of gate, of up)
  constexpr int kGroups = (kGateUp ? 2 : 1) * kHalfGroups;
  constexpr int kChunksPerRow = kBK / 8;  // 16-byte pieces of a row's slice
  constexpr int kAChunks = kBM * kChunksPerRow / kThreads;
  constexpr int kBChunks = kBRows * kChunksPerRow / kThreads;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;  // rows one pass of the CTA copies
  constexpr int kAElems = kBM * kRow;
  constexpr int kStageElems = (kBM + kBRows) * kRow;
  constexpr bool kGatherA = kGateUp;  // x rows by pair; down reads act's rows of the tile
  static_assert(kWM % 16 == 0 && kWN % 8 == 0 && kGroups % 2 == 0, "warp tile shape");
  static_assert(kBM * kChunksPerRow % kThreads == 0 && kBRows * kChunksPerRow % kThreads == 0,
                "every thread copies as many pieces");
  static_assert(kThreads % kChunksPerRow == 0, "a thread copies the same column of every row");
  static_assert(kBN % kRowsPerPass == 0, "a pass of rows is all gate or all up rows");

  extern __shared__ uint4 gemm_smem[];
  T* smem = reinterpret_cast<T*>(gemm_smem);
  __shared__ int32_t tile_pairs[kBM];

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int warp_m = warp / S::kWarpsN;
  const int warp_n = warp % S::kWarpsN;
  const int cta = static_cast<int>(blockIdx.x);
  const int m_tile = p.m_fastest ? cta % p.max_tiles : cta / p.n_tiles;
  const int n_tile = p.m_fastest ? cta / p.max_tiles : cta % p.n_tiles;

  // gate_up reads moe_align's map, written by the kernel just before: it waits first, and only
  // then lets down launch, so that down may read the map before its own wait. The map's three
  // reads go out together.
  if constexpr (kGateUp) {
    wait_for_prior_kernels();
    allow_next_kernel_launch();
  }
  const int tiles = __ldcg(p.num_tiles);
  const int expert = __ldcg(p.tile_experts + m_tile);
  const int tile_pair = tid < kBM ? __ldcg(p.sorted_pairs + m_tile * kBM + tid) : -1;
  if (m_tile >= tiles) return;  // past the tiles in use
  if (tid < kBM) tile_pairs[tid] = tile_pair;
  const int slot0 = m_tile * kBM;
  const int n0 = n_tile * kBN;
  const int column = (tid % kChunksPerRow) * 8;  // of the pieces this thread copies
  const int first_row = tid / kChunksPerRow;     // and the first of its rows
  const int k_tiles = (p.k + kBK - 1) / kBK;

  // The weight rows this thread copies: B rows first_row + i * kRowsPerPass of the tile (for
  // gate_up, rows [0, kBN) are gate rows and [kBN, 2 kBN) the matching up rows; rows past the
  // expert's columns are zeros).
  const int64_t expert_rows = static_cast<int64_t>(kGateUp ? 2 : 1) * p.n;
  const T* w =
      p.weight + (static_cast<int64_t>(expert) * expert_rows + n0 + first_row) * p.k + column;
  const bool b_in_columns = n0 + first_row < p.n;
  const uint64_t read_once = l2_evict_first_policy();
  const auto load_b = [&](int stage, int kt) {
    T* dst = smem + stage * kStageElems + kAElems + first_row * kRow + column;
    const int k = kt * kBK;
    const bool in_depth = k + column < p.k;
#pragma unroll
    for (int i = 0; i < kBChunks; ++i) {
      const bool up = kGateUp && i * kRowsPerPass >= kBN;
      const int offset = up ? i * kRowsPerPass - kBN : i * kRowsPerPass;  // columns past the first
      const bool valid = in_depth && (offset == 0 ? b_in_columns : n0 + first_row + offset < p.n);
      const T* src = w + static_cast<int64_t>(offset + (up ? p.n : 0)) * p.k + k;
      if (p.m_fastest) {
        cp_async_16(dst + i * kRowsPerPass * kRow, valid ? src : p.weight, valid, read_once);
      } else {
        cp_async_16(dst + i * kRowsPerPass * kRow, valid ? src : p.weight, valid);
      }
    }
  };

  // The weights' first stages, now that the expert is known; for down before its wait, while
  // gate_up finishes (they do not come from the kernel before).
#pragma unroll
  for (int s = 0; s < S::kStages - 1; ++s) {
    if (s < k_tiles) load_b(s, s);
    cp_async_commit();
  }
  if constexpr (!kGateUp) {
    wait_for_prior_kernels();
    allow_next_kernel_launch();
  }
  __syncthreads();  // tile_pairs

  // The A rows this thread copies, first_row + i * kRowsPerPass of the tile: gate_up gathers x
  // rows by pair (padding: -1, zeros); down reads act's rows of the tile's slots, padding rows
  // too: they only reach their own outputs, which are not stored.
  int a_row[kAChunks];
#pragma unroll
  for (int i = 0; i < kAChunks; ++i) {
    const int pair = tile_pairs[first_row + i * kRowsPerPass];
    a_row[i] = pair < 0 ? -1 : pair / p.top_k;
  }
  const T* a = p.a + (kGatherA ? 0 : (slot0 + first_row) * p.a_stride) + column;
  const auto load_a = [&](int stage, int kt) {
    T* dst = smem + stage * kStageElems + first_row * kRow + column;
    const int k = kt * kBK;
    const bool in_depth = k + column < p.k;
#pragma unroll
    for (int i = 0; i < kAChunks; ++i) {
      if constexpr (kGatherA) {
        const bool valid = in_depth && a_row[i] >= 0;
        cp_async_16(dst + i * kRowsPerPass * kRow,
                    valid ? a + static_cast<int64_t>(a_row[i]) * p.a_stride + k : p.a, valid);
      } else {
        cp_async_16(dst + i * kRowsPerPass * kRow,
                    in_depth ? a + static_cast<int64_t>(i * kRowsPerPass) * p.a_stride + k : p.a,
                    in_depth);
      }
    }
  };

  // The A groups of stages 0 .. kStages - 2 after the B groups above: with one group a stage
  // after them, stage kt has landed once at most kStages - 2 groups are pending at iteration kt.
#pragma unroll
  for (int s = 0; s < S::kStages - 1; ++s) {
    if (s < k_tiles) load_a(s, s);
    cp_async_commit();
  }

  // ldmatrix addresses: A rows lane % 16, depth (lane / 16) * 8; B matrices (group q + lane /
  // 16, depth half lane / 8 % 2), rows lane % 8.
  const int frag_row = warp_m * kWM + lane % 16;
  const int a_col = (lane / 16) * 8;
  const auto group_row = [&](int g) {
    if (kGateUp && g >= kHalfGroups) return kBN + warp_n * kWN + (g - kHalfGroups) * 8;
    return warp_n * kWN + g * 8;
  };
  const int b_col = (lane / 8 % 2) * 8;

  float acc[kMSub][kGroups][4];
#pragma unroll
  for (int i = 0; i < kMSub; ++i) {
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][g][c] = 0.0f;
    }
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<S::kStages - 2>();
    __syncthreads();  // stage kt has landed for every thread; stage kt - 1 is free again
    const int next = kt + S::kStages - 1;
    if (next < k_tiles) {
      load_a(next % S::kStages, next);
      load_b(next % S::kStages, next);
    }
    cp_async_commit();
    const T* sa = smem + (kt % S::kStages) * kStageElems;
    const T* sb = sa + kAElems;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      uint32_t af[kMSub][4];
#pragma unroll
      for (int i = 0; i < kMSub; ++i) {
        ldmatrix_x4(af[i], sa + (frag_row + i * 16) * kRow + kk * 16 + a_col);
      }
      uint32_t b[kGroups][2];
#pragma unroll
      for (int q = 0; q < kGroups; q += 2) {
        uint32_t r[4];
        ldmatrix_x4(r, sb + (group_row(q + lane / 16) + lane % 8) * kRow + kk * 16 + b_col);
        b[q][0] = r[0];
        b[q][1] = r[1];
        b[q + 1][0] = r[2];
        b[q + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kMSub; ++i) {
#pragma unroll
        for (int g = 0; g < kGroups; ++g) mma<T>(acc[i][g], af[i], b[g][0], b[g][1]);
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: thread holds rows (lane / 4, + 8) of each 16-row slice, columns (lane % 4) * 2
  // and + 1 of each group.
#pragma unroll
  for (int i = 0; i < kMSub; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = warp_m * kWM + i * 16 + lane / 4 + half * 8;
      const int pair = tile_pairs[r];
      if (pair < 0) continue;
      if constexpr (kGateUp) {
        T* out_row = p.out + static_cast<int64_t>(slot0 + r) * p.n;
#pragma unroll
        for (int g = 0; g < kHalfGroups; ++g) {
          const int col = n0 + warp_n * kWN + g * 8 + (lane % 4) * 2;
          if (col >= p.n) continue;
          const float* gate = acc[i][g] + 2 * half;
          const float* up = acc[i][g + kHalfGroups] + 2 * half;
          *reinterpret_cast<uint32_t*>(out_row + col) =
              pack_pair(silu_times<T>(round_to<T>(gate[0]), round_to<T>(up[0])),
                        silu_times<T>(round_to<T>(gate[1]), round_to<T>(up[1])), T{});
        }
      } else {
        const float weight = p.route_weights[pair];
        T* out_row = p.out + static_cast<int64_t>(pair) * p.n;
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
          const int col = n0 + warp_n * kWN + g * 8 + (lane % 4) * 2;
          if (col >= p.n) continue;
          const float* sum = acc[i][g] + 2 * half;
          *reinterpret_cast<uint32_t*>(out_row + col) =
              pack_pair(round_to<T>(sum[0]) * weight, round_to<T>(sum[1]) * weight, T{});
        }
      }
    }
  }
}

// The tile shapes. Decode: 16-row tiles 128 deep. gate_up: 4 warps side by side over 32 gate
// and 32 up columns, 5 stages, two CTAs an SM; below 1,024 pairs the narrow one, 2 warps over 16
// and 16, three CTAs an SM, twice the CTAs so that the few experts of a small batch are streamed
// by more SMs at once (Qwen3-30B-A3B at one row: gate_up 21.3 -> 20.3 us, its TP=2 shard 13.4
// -> 12.0 us). From 1,024 pairs (128 rows of Qwen3-30B-A3B) the wider CTAs stream better on an
// H200 (the whole op at 128 / 160 / 192 rows: 328 / 336 / 356 -> 324 / 330 / 346 us) and as
// well on an H100 (444 / 449 / 456 -> 445 / 450 / 458 us).
// down: 4 warps over 64 columns, 5 stages, two CTAs an SM; from 1,024 pairs on the shallow one,
// 3 stages and three CTAs an SM, whose many short CTAs overlap each other's start better (256
// rows: 179 -> 170 us; at one row it loses 15%).
// Wide decode: 32-row tiles over the same columns, each warp two 16-row slices, 4 stages so
// that two CTAs fit an SM.
// Prefill: 128 x 128 tiles of 8 warps (2 x 4, 64 x 32 each), 64 deep; gate_up (256 weight rows)
// 4 stages and one CTA an SM, down 3 stages and two CTAs an SM (against 128 x 64 gate_up tiles
// two an SM, and 32-deep down stages: each no better at 16,384 rows).
using DecodeGateUpShape = TileShape<16, 32, 128, 1, 4, 5, 2>;
using DecodeGateUpNarrowShape = TileShape<16, 16, 128, 1, 2, 5, 3>;
using DecodeDownShape = TileShape<16, 64, 128, 1, 4, 5, 2>;
using DecodeDownShallowShape = TileShape<16, 64, 128, 1, 4, 3, 3>;
using DecodeWideGateUpShape = TileShape<32, 32, 128, 1, 4, 4, 2>;
using DecodeWideDownShape = TileShape<32, 64, 128, 1, 4, 4, 2>;
using PrefillGateUpShape = TileShape<128, 128, 64, 2, 4, 4, 1>;
using PrefillDownShape = TileShape<128, 128, 64, 2, 4, 3, 2>;
inline constexpr int64_t kNarrowGateUpBelowPairs = 1024;
inline constexpr int64_t kShallowDownFromPairs = 1024;

// Host side: the checks both GEMMs' launchers make of `args` (moe.h), naming `op`.
inline void check_gemm_args(const MoeGemmArgs& args, const char* op) {
  NVLLM_CHECK_MSG(args.dtype == DType::kBF16 || args.dtype == DType::kF16,
                  "{}: dtype {} is not served (bfloat16, float16)", op, dtype_name(args.dtype));
  NVLLM_CHECK_MSG(
      args.map.tile_rows == moe_tile_rows(args.tiles) &&
          args.map.max_tiles >= moe_max_tiles(args.pairs, args.experts, args.map.tile_rows) &&
          args.map.max_tiles * args.map.tile_rows <= INT32_MAX,
      "{}: {} tiles of {} rows for {} pairs", op, args.map.max_tiles, args.map.tile_rows,
      args.pairs);
  NVLLM_CHECK_MSG(args.hidden > 0 && args.hidden % 8 == 0 && args.intermediate > 0 &&
                      args.intermediate % 8 == 0 && args.hidden <= INT32_MAX &&
                      args.intermediate <= INT32_MAX / 2,
                  "{}: hidden {} and intermediate {} must be positive multiples of 8", op,
                  args.hidden, args.intermediate);
  NVLLM_CHECK_MSG(args.top_k >= 1 && args.pairs % args.top_k == 0 && args.pairs <= INT32_MAX &&
                      args.experts >= 1 && args.experts <= INT32_MAX,
                  "{}: {} pairs of top_k {} over {} experts", op, args.pairs, args.top_k,
                  args.experts);
  NVLLM_CHECK_MSG(args.map.sorted_pairs != nullptr && args.map.tile_experts != nullptr &&
                      args.map.num_tiles != nullptr,
                  "{}: no tile map (moe_align)", op);
}

// Launches the kernel of shape S over every possible tile of `p` (p.max_tiles row tiles, the
// column tiles of p.n) in the CTA order `m_fastest`.
template <typename T, class S, bool kGateUp>
void launch_grouped_gemm(GemmParams<T> p, bool m_fastest, cudaStream_t stream) {
  const auto kernel = grouped_gemm_kernel<T, S, kGateUp>;
  constexpr size_t smem = gemm_smem_bytes<S, kGateUp>();
  if constexpr (smem > (size_t{48} << 10)) {
    NVLLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
  }
  p.n_tiles = (p.n + S::kBN - 1) / S::kBN;
  p.m_fastest = m_fastest;
  const int64_t ctas = static_cast<int64_t>(p.max_tiles) * p.n_tiles;
  NVLLM_CHECK_LE(ctas, int64_t{INT32_MAX});
  if (ctas == 0) return;
  launch_kernel(kernel, static_cast<unsigned>(ctas), S::kThreads, smem, stream, p);
}

}  // namespace nanovllm::cuda::moe
