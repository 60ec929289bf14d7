// moe_experts(): the scratch layout, the choice between the tensor-core paths (align, the two
// grouped GEMMs: CUTLASS's sm90 ones for bf16 at the prefill tiles, else mma.sync) and the
// per-pair kernels, and the tile shape for the batch.
#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/runtime/alignment.h"

namespace nanovllm::cuda {
namespace {

constexpr size_t kScratchAlignment = 256;

size_t align_up(size_t bytes) {
  return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
}

// Byte offsets of moe_experts' buffers in its scratch.
struct ScratchLayout {
  bool tensor_cores = false;
  bool cutlass = false;  // moe_cutlass_experts
  MoeTiles tiles = MoeTiles::kDecode;
  MoeTileMap map;  // tile_rows and max_tiles; the pointers are set from the offsets below
  size_t sorted_pairs = 0;
  size_t tile_experts = 0;
  size_t num_tiles = 0;
  size_t align_scratch = 0;
  size_t act = 0;       // [slots or pairs, intermediate]
  size_t weighted = 0;  // [pairs, hidden]
  // The CUTLASS path's own buffers (act above is [slots, intermediate]; no weighted).
  size_t xs = 0;          // [slots, hidden], then y
  size_t gu = 0;          // [slots, 2 intermediate]
  size_t pair_slots = 0;  // [pairs]
  size_t cutlass_scratch = 0;
  size_t total = 0;
};

ScratchLayout layout_for(const MoeExpertsArgs& args) {
  ScratchLayout layout;
  const int64_t pairs = args.rows * args.top_k;
  const int64_t element = static_cast<int64_t>(dtype_size(args.dtype));
  size_t end = 0;
  const auto take = [&](int64_t bytes) {
    const size_t at = end;
    end = align_up(end + static_cast<size_t>(bytes));
    return at;
  };
  layout.tensor_cores = moe_tensor_cores_serve(args);
  int64_t act_rows = pairs;
  if (layout.tensor_cores) {
    layout.tiles = moe_tiles_for(pairs, args.experts);
    layout.map.tile_rows = moe_tile_rows(layout.tiles);
    layout.map.max_tiles = moe_max_tiles(pairs, args.experts, layout.map.tile_rows);
    act_rows = layout.map.max_tiles * layout.map.tile_rows;
    layout.sorted_pairs = take(act_rows * 4);
    layout.tile_experts = take(layout.map.max_tiles * 4);
    layout.num_tiles = take(4);
    layout.align_scratch = take(moe_align_scratch_ints(pairs, args.experts) * 4);
    layout.cutlass = args.dtype == DType::kBF16 && layout.tiles == MoeTiles::kPrefill;
  }
  layout.act = take(act_rows * args.intermediate * element);
  if (layout.cutlass) {
    layout.xs = take(act_rows * args.hidden * element);
    layout.gu = take(act_rows * 2 * args.intermediate * element);
    layout.pair_slots = take(pairs * 4);
    layout.cutlass_scratch = take(static_cast<int64_t>(moe_cutlass_scratch_bytes(args.experts)));
  } else {
    layout.weighted = take(pairs * args.hidden * element);
  }
  layout.total = end;
  return layout;
}

void check_args(const MoeExpertsArgs& args) {
  NVLLM_CHECK_MSG(args.rows >= 0 && args.hidden >= 0 && args.top_k >= 0,
                  "moe_experts: rows {}, hidden {}, top_k {}", args.rows, args.hidden, args.top_k);
  NVLLM_CHECK_MSG(args.intermediate >= 1, "moe_experts: intermediate {} (expected >= 1)",
                  args.intermediate);
  NVLLM_CHECK_MSG(args.experts >= 1 && args.experts <= kMoeMaxExperts,
                  "moe_experts: {} experts, expected 1 to {}", args.experts, kMoeMaxExperts);
  NVLLM_CHECK_MSG(args.rows * args.top_k <= INT32_MAX / 4, "moe_experts: {} rows of {} experts",
                  args.rows, args.top_k);
}

// The GEMMs' view of the batch, their tile map in `scratch` (laid out by `layout`).
MoeGemmArgs gemm_args(const MoeExpertsArgs& args, const ScratchLayout& layout, char* scratch) {
  MoeGemmArgs gemm;
  gemm.dtype = args.dtype;
  gemm.tiles = layout.tiles;
  gemm.pairs = args.rows * args.top_k;
  gemm.experts = args.experts;
  gemm.top_k = args.top_k;
  gemm.hidden = args.hidden;
  gemm.intermediate = args.intermediate;
  gemm.map = layout.map;
  gemm.map.sorted_pairs = reinterpret_cast<int32_t*>(scratch + layout.sorted_pairs);
  gemm.map.tile_experts = reinterpret_cast<int32_t*>(scratch + layout.tile_experts);
  gemm.map.num_tiles = reinterpret_cast<int32_t*>(scratch + layout.num_tiles);
  gemm.map.align_scratch = reinterpret_cast<int32_t*>(scratch + layout.align_scratch);
  return gemm;
}

}  // namespace

MoeTiles moe_tiles_for(int64_t pairs, int64_t experts) {
  // Averaging fewer than 14 rows an expert, 16-row tiles: most runs fit one. From 14 on, where
  // 16-row tiles split more and more runs in two, 32-row ones; from 32 on, 128-row tiles (in
  // bf16 CUTLASS's), which reuse each expert's weights over many rows. moe_bench,
  // Qwen3-30B-A3B's experts, the whole op through 16-row / 32-row / CUTLASS tiles, us:
  //   rows   H100               H200
  //    192   457 / 465 / 496    355 / 357 / 373
  //    224   470 / 469 / 499    381 / 362 / 376
  //    256   492 / 473 / 502    411 / 369 / 377
  // A batch of prefill size takes the prefill tiles whatever the experts.
  if (pairs >= 32 * experts || pairs + experts > 16384) return MoeTiles::kPrefill;
  return pairs >= 14 * experts ? MoeTiles::kDecodeWide : MoeTiles::kDecode;
}

bool moe_tensor_cores_serve(const MoeExpertsArgs& args) {
  return (args.dtype == DType::kBF16 || args.dtype == DType::kF16) && args.hidden > 0 &&
         args.hidden % 8 == 0 && args.intermediate % 8 == 0 && args.x_stride % 8 == 0 &&
         aligned_to(args.x, 16) && aligned_to(args.gate_up, 16) && aligned_to(args.down, 16);
}

size_t moe_experts_scratch_bytes(const MoeExpertsArgs& args) {
  check_args(args);
  return layout_for(args).total;
}

void moe_experts(const MoeExpertsArgs& args, void* scratch, cudaStream_t stream) {
  check_args(args);
  if (args.rows == 0 || args.hidden == 0) return;
  const int64_t pairs = args.rows * args.top_k;
  const ScratchLayout layout = layout_for(args);
  NVLLM_CHECK_MSG(scratch != nullptr, "moe_experts: no scratch");
  char* base = static_cast<char*>(scratch);
  void* act = base + layout.act;
  void* weighted = base + layout.weighted;
  if (pairs > 0 && layout.cutlass) {
    MoeCutlassArgs c;
    c.gemm = gemm_args(args, layout, base);
    c.ids = args.ids;
    c.x = args.x;
    c.x_stride = args.x_stride;
    c.gate_up = args.gate_up;
    c.down = args.down;
    c.xs = base + layout.xs;
    c.gu = base + layout.gu;
    c.act = act;
    c.y = c.xs;
    c.pair_slots = reinterpret_cast<int32_t*>(base + layout.pair_slots);
    c.scratch = base + layout.cutlass_scratch;
    moe_cutlass_experts(c, stream);
    moe_combine_slots(args.dtype, c.y, c.pair_slots, args.ids, args.weights, args.rows, args.top_k,
                      args.experts, args.hidden, args.out, args.out_stride, stream, args.then);
    return;
  }
  if (pairs > 0 && layout.tensor_cores) {
    const MoeGemmArgs gemm = gemm_args(args, layout, base);
    moe_align(args.ids, pairs, args.experts, gemm.map, stream);
    moe_gate_up(gemm, args.x, args.x_stride, args.gate_up, act, stream);
    // Right after moe_gate_up, whose end it overlaps (moe_down's contract).
    moe_down(gemm, act, args.weights, args.down, weighted, stream);
  } else if (pairs > 0) {
    moe_gate_up_simt(args.dtype, args.x, args.x_stride, args.ids, pairs, args.top_k, args.experts,
                     args.gate_up, args.hidden, args.intermediate, act, stream);
    moe_down_simt(args.dtype, act, args.ids, args.weights, pairs, args.experts, args.down,
                  args.hidden, args.intermediate, weighted, stream);
  }
  moe_combine(args.dtype, weighted, args.ids, args.rows, args.top_k, args.experts, args.hidden,
              args.out, args.out_stride, stream, args.then);
}

}  // namespace nanovllm::cuda
