// The experts' prefill path in bf16 on Hopper: both products as CUTLASS sm90 grouped GEMMs
// (wgmma fed by TMA, warp-specialised, persistent), one group per expert. moe_align's map
// (128-row runs) gives each expert's slots; a one-CTA kernel turns it into the GEMMs' problem
// sizes, operand pointers and strides on the device (CUTLASS gets no host problem sizes and
// launches one CTA per SM), so nothing here reads sizes on the host: graph-capturable. Between
// the GEMMs, small kernels gather x rows into slot order and apply SiLU * up; the combine reads
// each pair's row through pair_slots. Only the CUTLASS headers are used (nvidia-cutlass).
#include <cuda_bf16.h>

#include <mutex>

#include "core/check.h"
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "kernels/cuda/device/elementwise_math.cuh"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/runtime/cuda_check.h"
#include "kernels/cuda/runtime/launch.cuh"

#if !defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
#error "moe_cutlass.cu needs CUTLASS's sm90 grouped GEMM (CUDA 12.3 or later)"
#endif

namespace nanovllm::cuda {
namespace {

using namespace cute;

// One GEMM type serves both products: D [m, n] = A [m, k] (row-major) @ B^T, B [n, k]
// row-major (the experts' weights as stored), bf16 in and out, f32 accumulation.
using Element = cutlass::bfloat16_t;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutD = cutlass::layout::RowMajor;
constexpr int kAlignment = 8;  // elements: 16 bytes
using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
// Cooperative 128x256x64 tiles in 1x2 clusters (the two CTAs of a cluster share their x rows).
// moe_bench on an H200, Qwen3-30B-A3B's experts (I 768) at 2,048 to 16,384 rows: as fast as
// ping-pong 128x128 tiles in 1x2 clusters and as these tiles without clusters, faster than 2x1
// clusters (by 3-8%) and than cooperative 128x128 tiles (by 7-15%). At I 384 (three 256-column
// tiles, so one 1x2 cluster in two is half idle) the ping-pong and cluster-less ones were 4-10%
// faster at 8,192 rows and more.
using TileShape = Shape<_128, _256, _64>;
using ClusterShape = Shape<_1, _2, _1>;
using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlignment,
    Element, LayoutD*, kAlignment, EpilogueSchedule,
    cutlass::epilogue::fusion::LinearCombination<Element, float, void, float>>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA*, kAlignment, Element,
    LayoutB*, kAlignment, float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    KernelSchedule>::CollectiveOp;

using GemmKernel =
    cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
using Shape3 = typename ProblemShape::UnderlyingProblemShape;
using StrideA = typename GemmKernel::InternalStrideA;
using StrideB = typename GemmKernel::InternalStrideB;
using StrideD = typename GemmKernel::InternalStrideD;

// The device arrays of one grouped GEMM, experts entries each.
struct GroupArrays {
  Shape3* shapes;
  const Element** a;
  const Element** b;
  Element** d;
  StrideA* stride_a;
  StrideB* stride_b;
  StrideD* stride_d;
};

size_t align_256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

size_t group_arrays_bytes(int64_t experts) {
  const auto n = static_cast<size_t>(experts);
  return align_256(n * sizeof(Shape3)) + 3 * align_256(n * sizeof(void*)) +
         align_256(n * sizeof(StrideA)) + align_256(n * sizeof(StrideB)) +
         align_256(n * sizeof(StrideD));
}

GroupArrays group_arrays_at(char* base, int64_t experts) {
  const auto n = static_cast<size_t>(experts);
  GroupArrays g{};
  const auto take = [&](size_t bytes) {
    char* at = base;
    base += align_256(bytes);
    return at;
  };
  g.shapes = reinterpret_cast<Shape3*>(take(n * sizeof(Shape3)));
  g.a = reinterpret_cast<const Element**>(take(n * sizeof(void*)));
  g.b = reinterpret_cast<const Element**>(take(n * sizeof(void*)));
  g.d = reinterpret_cast<Element**>(take(n * sizeof(void*)));
  g.stride_a = reinterpret_cast<StrideA*>(take(n * sizeof(StrideA)));
  g.stride_b = reinterpret_cast<StrideB*>(take(n * sizeof(StrideB)));
  g.stride_d = reinterpret_cast<StrideD*>(take(n * sizeof(StrideD)));
  return g;
}

// SM count and active clusters of each device, queried once.
cutlass::KernelHardwareInfo hardware_info() {
  constexpr int kMaxDevices = 64;
  static cutlass::KernelHardwareInfo infos[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  int device = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&device));
  NVLLM_CHECK_LT(device, kMaxDevices);
  std::call_once(once[device], [&] {
    infos[device] = cutlass::KernelHardwareInfo::make_kernel_hardware_info<GemmKernel>(device);
  });
  return infos[device];
}

typename Gemm::Arguments gemm_arguments(const GroupArrays& g, int64_t experts) {
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGrouped,
                                {static_cast<int>(experts), g.shapes, nullptr},
                                {g.a, g.stride_a, g.b, g.stride_b},
                                {{}, nullptr, g.stride_d, g.d, g.stride_d},
                                hardware_info()};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  return args;
}

size_t gemm_workspace_bytes(int64_t experts) {
  const GroupArrays none{};
  return Gemm::get_workspace_size(gemm_arguments(none, experts));
}

void run_gemm(const GroupArrays& g, int64_t experts, void* workspace, cudaStream_t stream,
              const char* what) {
  const typename Gemm::Arguments args = gemm_arguments(g, experts);
  Gemm gemm;
  cutlass::Status status = gemm.can_implement(args);
  NVLLM_CHECK_MSG(status == cutlass::Status::kSuccess, "{}: CUTLASS cannot run it: {}", what,
                  cutlassGetStatusString(status));
  status = gemm.initialize(args, workspace, stream);
  NVLLM_CHECK_MSG(status == cutlass::Status::kSuccess, "{}: CUTLASS initialize: {}", what,
                  cutlassGetStatusString(status));
  status = gemm.run(stream);
  NVLLM_CHECK_MSG(status == cutlass::Status::kSuccess, "{}: CUTLASS run: {}", what,
                  cutlassGetStatusString(status));
  NVLLM_CUDA_CHECK(cudaGetLastError());
}

// One CTA: each expert's run of slots from the map (its first tile, and the valid rows of its
// last), then both GEMMs' sizes, pointers and strides. Experts without pairs get m = 0.
// Dynamic shared memory: 2 * experts ints.
__global__ void setup_groups_kernel(const int32_t* sorted_pairs, const int32_t* tile_experts,
                                    const int32_t* num_tiles, int tile_rows, int experts,
                                    int hidden, int intermediate, const Element* xs,
                                    const Element* gate_up, Element* gu, const Element* act,
                                    const Element* down, Element* y, GroupArrays g1,
                                    GroupArrays g2) {
  start_after_prior_kernels();
  extern __shared__ int setup_smem[];
  int* first_slot = setup_smem;          // the expert's first slot
  int* end_slot = first_slot + experts;  // one past its last valid slot
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  for (int e = tid; e < experts; e += threads) {
    first_slot[e] = 0;
    end_slot[e] = 0;
  }
  __syncthreads();
  const int tiles = *num_tiles;
  for (int t = tid; t < tiles; t += threads) {
    const int e = tile_experts[t];
    if (t == 0 || tile_experts[t - 1] != e) first_slot[e] = t * tile_rows;
    if (t == tiles - 1 || tile_experts[t + 1] != e) {
      // The run's padding (-1) is at the end of its last tile.
      const int32_t* rows = sorted_pairs + static_cast<int64_t>(t) * tile_rows;
      int valid = 0;
      while (valid < tile_rows && rows[valid] >= 0) ++valid;
      end_slot[e] = t * tile_rows + valid;
    }
  }
  __syncthreads();
  const int64_t two_i = 2 * static_cast<int64_t>(intermediate);
  for (int e = tid; e < experts; e += threads) {
    const int64_t first = first_slot[e];
    const int m = end_slot[e] - first_slot[e];
    g1.shapes[e] = Shape3{m, static_cast<int>(two_i), hidden};
    g1.a[e] = xs + first * hidden;
    g1.b[e] = gate_up + e * two_i * hidden;
    g1.d[e] = gu + first * two_i;
    g1.stride_a[e] = make_stride(static_cast<int64_t>(hidden), Int<1>{}, Int<0>{});
    g1.stride_b[e] = make_stride(static_cast<int64_t>(hidden), Int<1>{}, Int<0>{});
    g1.stride_d[e] = make_stride(two_i, Int<1>{}, Int<0>{});
    g2.shapes[e] = Shape3{m, hidden, intermediate};
    g2.a[e] = act + first * intermediate;
    g2.b[e] = down + static_cast<int64_t>(e) * hidden * intermediate;
    g2.d[e] = y + first * hidden;
    g2.stride_a[e] = make_stride(static_cast<int64_t>(intermediate), Int<1>{}, Int<0>{});
    g2.stride_b[e] = make_stride(static_cast<int64_t>(intermediate), Int<1>{}, Int<0>{});
    g2.stride_d[e] = make_stride(static_cast<int64_t>(hidden), Int<1>{}, Int<0>{});
  }
}

constexpr int kRowsPerCta = 8;  // one warp per slot

// xs[s] = x[pair / top_k] and pair_slots[pair] = s for every slot s holding a pair.
__global__ void gather_kernel(const __nv_bfloat16* x, int64_t x_stride, const int32_t* sorted_pairs,
                              const int32_t* num_tiles, int tile_rows, int top_k, int hidden,
                              __nv_bfloat16* xs, int32_t* pair_slots) {
  start_after_prior_kernels();
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * kRowsPerCta + warp;
  if (slot >= static_cast<int64_t>(*num_tiles) * tile_rows) return;
  const int pair = sorted_pairs[slot];
  if (pair < 0) return;
  if (lane == 0) pair_slots[pair] = static_cast<int32_t>(slot);
  const __nv_bfloat16* src = x + static_cast<int64_t>(pair / top_k) * x_stride;
  __nv_bfloat16* dst = xs + slot * hidden;
  constexpr int kWidth = kVecWidth<__nv_bfloat16>;
  for (int h = lane * kWidth; h < hidden; h += 32 * kWidth) {
    copy_elements<__nv_bfloat16, kWidth>(src + h, dst + h);
  }
}

// act[s] = silu_mul(gu[s]) for every slot s holding a pair, as silu_mul rounds it.
__global__ void silu_mul_slots_kernel(const __nv_bfloat16* gu, const int32_t* sorted_pairs,
                                      const int32_t* num_tiles, int tile_rows, int intermediate,
                                      __nv_bfloat16* act) {
  start_after_prior_kernels();
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * kRowsPerCta + warp;
  if (slot >= static_cast<int64_t>(*num_tiles) * tile_rows) return;
  if (sorted_pairs[slot] < 0) return;
  const __nv_bfloat16* gate = gu + slot * 2 * intermediate;
  const __nv_bfloat16* up = gate + intermediate;
  __nv_bfloat16* out = act + slot * intermediate;
  constexpr int kWidth = kVecWidth<__nv_bfloat16>;
  for (int i = lane * kWidth; i < intermediate; i += 32 * kWidth) {
    float g[kWidth];
    float u[kWidth];
    load_floats<__nv_bfloat16, kWidth>(gate + i, g);
    load_floats<__nv_bfloat16, kWidth>(up + i, u);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) g[j] = silu_times<__nv_bfloat16>(g[j], u[j]);
    store_floats<__nv_bfloat16, kWidth>(out + i, g);
  }
}

unsigned slot_ctas(const MoeGemmArgs& args) {
  const int64_t slots = args.map.max_tiles * args.map.tile_rows;
  return static_cast<unsigned>((slots + kRowsPerCta - 1) / kRowsPerCta);
}

}  // namespace

size_t moe_cutlass_scratch_bytes(int64_t experts) {
  return 2 * group_arrays_bytes(experts) + align_256(gemm_workspace_bytes(experts));
}

void moe_cutlass_experts(const MoeCutlassArgs& args, cudaStream_t stream) {
  const MoeGemmArgs& gemm = args.gemm;
  NVLLM_CHECK_MSG(gemm.dtype == DType::kBF16 && gemm.tiles == MoeTiles::kPrefill,
                  "moe_cutlass_experts: bf16 at the prefill tiles only");
  NVLLM_CHECK_MSG(gemm.hidden % 8 == 0 && gemm.intermediate % 8 == 0 && args.x_stride % 8 == 0,
                  "moe_cutlass_experts: widths must be multiples of 8");
  NVLLM_CHECK_LE(gemm.hidden, int64_t{INT32_MAX});
  NVLLM_CHECK_LE(2 * gemm.intermediate, int64_t{INT32_MAX});
  if (gemm.pairs == 0) return;
  const int64_t experts = gemm.experts;
  char* scratch = static_cast<char*>(args.scratch);
  const GroupArrays g1 = group_arrays_at(scratch, experts);
  const GroupArrays g2 = group_arrays_at(scratch + group_arrays_bytes(experts), experts);
  void* workspace = scratch + 2 * group_arrays_bytes(experts);

  const auto* x = static_cast<const __nv_bfloat16*>(args.x);
  auto* xs = static_cast<__nv_bfloat16*>(args.xs);
  auto* gu = static_cast<__nv_bfloat16*>(args.gu);
  auto* act = static_cast<__nv_bfloat16*>(args.act);
  auto* y = static_cast<__nv_bfloat16*>(args.y);
  const int hidden = static_cast<int>(gemm.hidden);
  const int intermediate = static_cast<int>(gemm.intermediate);

  moe_align(args.ids, gemm.pairs, experts, gemm.map, stream);
  if (args.stages < 2) return;
  launch_kernel(setup_groups_kernel, 1, 1024, 2 * static_cast<size_t>(experts) * sizeof(int),
                stream, gemm.map.sorted_pairs, gemm.map.tile_experts, gemm.map.num_tiles,
                gemm.map.tile_rows, static_cast<int>(experts), hidden, intermediate,
                reinterpret_cast<const Element*>(xs), static_cast<const Element*>(args.gate_up),
                reinterpret_cast<Element*>(gu), reinterpret_cast<const Element*>(act),
                static_cast<const Element*>(args.down), reinterpret_cast<Element*>(y), g1, g2);
  launch_kernel(gather_kernel, slot_ctas(gemm), kRowsPerCta * 32, 0, stream, x, args.x_stride,
                gemm.map.sorted_pairs, gemm.map.num_tiles, gemm.map.tile_rows, gemm.top_k, hidden,
                xs, args.pair_slots);
  if (args.stages < 3) return;
  run_gemm(g1, experts, workspace, stream, "moe_experts (gate_up)");
  if (args.stages < 4) return;
  launch_kernel(silu_mul_slots_kernel, slot_ctas(gemm), kRowsPerCta * 32, 0, stream,
                static_cast<const __nv_bfloat16*>(gu), gemm.map.sorted_pairs, gemm.map.num_tiles,
                gemm.map.tile_rows, intermediate, act);
  if (args.stages < 5) return;
  run_gemm(g2, experts, workspace, stream, "moe_experts (down)");
}

}  // namespace nanovllm::cuda
