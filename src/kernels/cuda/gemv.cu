// out [m, n] = x [m, k] @ weight [n, k]^T for m <= 8 on tensor cores, reading the weight once.
//
// A CTA owns a tile of 8 weight rows and its warps split k. Lane (g = lane / 4, t = lane % 4)
// copies 16-byte vectors (8 consecutive k) of weight row g and of x row g into shared memory
// with cp.async, kVectorsPerStep of each at once, so a CTA has up to 64 KB of the weight in
// flight whatever the compiler's scheduling; the 4 lanes of a row read 64 contiguous bytes.
// Each lane reads back only its own vectors, so a wait on its own copies is all the sync needed.
// One m16n8k16 MMA takes x rows as A rows 0..7 (rows 8..15 zero) and the tile's weight rows as
// B columns. An MMA sums over its 16 k slots, so any assignment of physical k to slots works
// when x and weight share it: lane t's slots 2t, 2t+1, 2t+8, 2t+9 hold elements 0..3 of its
// vector in one MMA and elements 4..7 in the next, for x (A) and the weight (B) alike. The
// warps' partial sums meet in shared memory and are added in a fixed order (deterministic).
#include "kernels/cuda/gemv.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mma_top_rows.cuh"
#include "kernels/cuda/vec.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kTileRows = 8;        // weight rows per CTA: the MMA's n
constexpr int kLanesPerRow = 4;     // lanes sharing a weight row (and an x row)
constexpr int kVectorsPerStep = 8;  // 16-byte weight loads per lane in flight at once
constexpr int kMaxWarps = 16;       // warps splitting k in one CTA
constexpr int kElemsPerVector = 8;  // bf16/f16 elements in 16 bytes
constexpr int kStepVectors = kLanesPerRow * kVectorsPerStep;  // of one row, per warp and step

static_assert(kGemvMaxRows == kTileRows, "lane group g serves x row g as well as tile row g");

// Copies 16 bytes global -> shared; with `valid` false nothing is read and the destination is
// zero-filled. The weight is read once: it bypasses L1 and comes from DRAM in 256-byte pieces
// (a warp reads 512 contiguous bytes of a row per step). Every CTA reads all of x: it stays in
// L1 for the other CTAs on the SM.
__device__ __forceinline__ void copy_weight_async(void* smem, const void* global, bool valid) {
  const auto smem_address = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_address),
               "l"(global), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void copy_x_async(void* smem, const void* global, bool valid) {
  const auto smem_address = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address), "l"(global),
               "r"(valid ? 16 : 0)
               : "memory");
}

// Waits for all of this thread's cp.async copies.
__device__ __forceinline__ void wait_copies() {
  asm volatile(
      "cp.async.commit_group;\n"
      "cp.async.wait_group 0;\n" ::
          : "memory");
}

// Shared memory of a warp: kVectorsPerStep vectors per lane of the weight, then of x; and its
// partial sums [x row][tile row].
constexpr int kStagedVectors = 2 * kVectorsPerStep * 32;
constexpr size_t kWarpSmemBytes = kStagedVectors * sizeof(uint4) + kTileRows * kTileRows * 4;

// Grid: one CTA per tile of kTileRows weight rows; block: 1..kMaxWarps warps splitting k;
// dynamic shared memory: warps * kWarpSmemBytes.
template <typename T, typename OutT>
__global__ void __launch_bounds__(kMaxWarps * 32)
    gemv_kernel(const T* __restrict__ x, int64_t ldx, const T* __restrict__ weight, int64_t ldw,
                OutT* __restrict__ out, int64_t ldo, int m, int64_t n, int64_t k) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  // [warps][2][kVectorsPerStep][32 lanes] vectors, then [warps][x row][tile row] floats.
  extern __shared__ uint4 staging[];
  auto* partial =
      reinterpret_cast<float(*)[kTileRows][kTileRows]>(staging + warps * kStagedVectors);
  const int g = lane / kLanesPerRow;  // x row and tile row of this lane
  const int t = lane % kLanesPerRow;  // its vector within each group of 4
  const int64_t tile_first = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const bool weight_row_valid = tile_first + g < n;
  const bool x_row_valid = g < m;
  const T* weight_row = weight + (weight_row_valid ? (tile_first + g) * ldw : 0);  // [k]
  const T* x_row = x + (x_row_valid ? g * ldx : 0);                                // [k]
  const int64_t vectors = k / kElemsPerVector;                                     // of a row
  uint4* staged_weight = staging + warp * kStagedVectors + lane;                   // stride 32
  uint4* staged_x = staged_weight + kVectorsPerStep * 32;

  // c[0..1]: out (x row g, tile rows 2t and 2t + 1); c[2..3] stay zero (A rows 8..15).
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  // A step covers vectors [first, first + kStepVectors) of the rows: lane t takes t, t + 4, ...
  const auto copy_weight_step = [&](int64_t first) {
#pragma unroll
    for (int i = 0; i < kVectorsPerStep; ++i) {
      const int64_t v = first + i * kLanesPerRow + t;
      const bool valid = weight_row_valid && v < vectors;
      copy_weight_async(staged_weight + i * 32, weight_row + (valid ? v * kElemsPerVector : 0),
                        valid);
    }
  };
  // The weight is no earlier kernel's output: the first step's copies go out while the kernel
  // before this one finishes (launch.cuh); x and out wait for it.
  const int64_t first_step = static_cast<int64_t>(warp) * kStepVectors;
  allow_next_kernel_launch();
  copy_weight_step(first_step);
  wait_for_prior_kernels();
  for (int64_t first = first_step; first < vectors;
       first += static_cast<int64_t>(warps) * kStepVectors) {
    if (first != first_step) copy_weight_step(first);
#pragma unroll
    for (int i = 0; i < kVectorsPerStep; ++i) {
      const int64_t v = first + i * kLanesPerRow + t;
      const bool valid = x_row_valid && v < vectors;
      copy_x_async(staged_x + i * 32, x_row + (valid ? v * kElemsPerVector : 0), valid);
    }
    wait_copies();
#pragma unroll
    for (int i = 0; i < kVectorsPerStep; ++i) {
      const uint4 w = staged_weight[i * 32];
      const uint4 a = staged_x[i * 32];
      mma_top_rows<T>(c, a.x, a.y, w.x, w.y);  // elements 0..3
      mma_top_rows<T>(c, a.z, a.w, w.z, w.w);  // elements 4..7
    }
  }

  *reinterpret_cast<float2*>(&partial[warp][g][2 * t]) = make_float2(c[0], c[1]);
  __syncthreads();
  // A block may have a single warp (short k): it then sums more than one entry per thread.
  for (int e = static_cast<int>(threadIdx.x); e < kTileRows * kTileRows;
       e += static_cast<int>(blockDim.x)) {
    const int row = e / kTileRows;  // of x and out
    const int col = e % kTileRows;  // within the tile
    if (row < m && tile_first + col < n) {
      float sum = 0.0f;
      for (int j = 0; j < warps; ++j) sum += partial[j][row][col];
      out[row * ldo + tile_first + col] = from_float<OutT>(sum);
    }
  }
}

bool aligned_16(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

template <typename T, typename OutT>
void launch(const GemvArgs& args, int64_t tiles, int warps, cudaStream_t stream) {
  const auto kernel = gemv_kernel<T, OutT>;
  const size_t smem = warps * kWarpSmemBytes;
  if (smem > size_t{48} << 10) {
    // Above the default limit; one value for every launch, so the call is idempotent.
    NVLLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kMaxWarps * kWarpSmemBytes)));
  }
  launch_kernel(kernel, static_cast<unsigned>(tiles), warps * 32, smem, stream,
                static_cast<const T*>(args.x), args.ldx, static_cast<const T*>(args.weight),
                args.ldw, static_cast<OutT*>(args.out), args.ldo, static_cast<int>(args.m), args.n,
                args.k);
}

template <typename T>
void launch_for_out(const GemvArgs& args, int64_t tiles, int warps, cudaStream_t stream) {
  if (args.out_dtype == DType::kF32) {
    launch<T, float>(args, tiles, warps, stream);
  } else {
    launch<T, T>(args, tiles, warps, stream);
  }
}

}  // namespace

bool gemv_supported(const GemvArgs& args) {
  const bool half_inputs = args.in_dtype == DType::kBF16 || args.in_dtype == DType::kF16;
  const bool out_ok = args.out_dtype == args.in_dtype || args.out_dtype == DType::kF32;
  // A stride matters only where there is a second row to reach.
  const bool x_stride_ok = args.m == 1 || args.ldx % kElemsPerVector == 0;
  const bool weight_stride_ok = args.n == 1 || args.ldw % kElemsPerVector == 0;
  return half_inputs && out_ok && args.m >= 1 && args.m <= kGemvMaxRows && args.n >= 1 &&
         args.k > 0 && args.k % kElemsPerVector == 0 && aligned_16(args.x) &&
         aligned_16(args.weight) && x_stride_ok && weight_stride_ok;
}

void gemv(const GemvArgs& args, cudaStream_t stream) {
  NVLLM_CHECK_MSG(gemv_supported(args), "gemv: unsupported operands ({}x{}x{}, {} -> {})", args.m,
                  args.n, args.k, dtype_name(args.in_dtype), dtype_name(args.out_dtype));
  const int64_t tiles = (args.n + kTileRows - 1) / kTileRows;
  NVLLM_CHECK_LE(tiles, int64_t{INT32_MAX});
  // Enough warps that each lane's loads fit in one step where k allows it, so a CTA has its
  // whole share of the weight in flight at once.
  const int64_t vectors = args.k / kElemsPerVector;
  const int warps =
      static_cast<int>(std::min<int64_t>(kMaxWarps, (vectors + kStepVectors - 1) / kStepVectors));
  if (args.in_dtype == DType::kBF16) {
    launch_for_out<__nv_bfloat16>(args, tiles, warps, stream);
  } else {
    launch_for_out<__half>(args, tiles, warps, stream);
  }
}

}  // namespace nanovllm::cuda
