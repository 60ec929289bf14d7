// Mixture-of-experts on the GPU: host launchers of the router (softmax and top-k) and of the
// experts' MLPs. Each takes device pointers, sizes and row strides (in elements), enqueues its
// kernels on `stream` and returns; nothing here synchronizes, copies to the host or allocates,
// so every launcher can be captured in a CUDA graph. `dtype` (f32, bf16 or f16) is the type of
// the logits, activations and weights; routing weights are f32 and ids int32.
//
// moe_experts() runs, for bf16/f16 operands with widths that are multiples of 8:
//   moe_align     ids -> the (token, slot) pairs grouped by expert, each expert's run padded to
//                 the GEMMs' row tile, and the expert of every row tile;
//   moe_gate_up   per row tile, x rows @ the expert's gate and up rows^T, SiLU * up in the
//                 epilogue -> act [slots, intermediate];
//   moe_down      per row tile, act @ the expert's down rows^T times the routing weight ->
//                 weighted [pairs, hidden], row t * top_k + j;
//   moe_combine   out[t] = the sum over j of weighted[t * top_k + j], in j order, rounded once
//                 (and, asked to, the next residual add + RMSNorm: MoeAddRmsNorm).
// In bf16 at the prefill tiles, moe_cutlass_experts stands in for moe_gate_up and moe_down:
// x rows gathered in slot order, CUTLASS's sm90 grouped GEMMs (wgmma, TMA) with SiLU * up
// between them, and moe_combine_slots weighs and sums each row's pairs.
// The number of row tiles is known on the device only: the GEMMs are launched for an upper
// bound and the surplus CTAs exit. In f32 (and for widths the tensor cores cannot take) plain
// per-pair kernels (moe_gate_up_simt, moe_down_simt) stand in for align and the GEMMs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace nanovllm::cuda {

// ---- The router -------------------------------------------------------------------------------

struct MoeRouteArgs {
  DType dtype = DType::kBF16;
  const void* logits = nullptr;  // [rows, experts], rows logits_stride elements apart
  int64_t logits_stride = 0;
  int64_t rows = 0;
  int64_t experts = 0;
  int top_k = 1;  // 1 <= top_k <= experts
  bool normalize = false;
  float* weights = nullptr;  // [rows, top_k]
  int32_t* ids = nullptr;    // [rows, top_k]
};

// The most experts moe_route takes (a warp keeps a row's probabilities in shared memory).
inline constexpr int64_t kMoeRouteMaxExperts = 12288;

// Per row: the softmax of the logits in f32, then the top_k experts (most likely first, the
// lower id on ties) and their probabilities, divided by their sum when `normalize`, rounded to
// dtype (stored as f32). A row whose probabilities are all NaN gets ids -1 and weights 0.
void moe_route(const MoeRouteArgs& args, cudaStream_t stream);

// ---- The experts ------------------------------------------------------------------------------

// What the experts' last step may fold in: add_rms_norm(out, residual, weight, eps), i.e.
// residual[t] += out[t] (rounded to dtype), then out[t] = RMSNorm(residual[t]) * weight, with
// add_rms_norm's arithmetic (the next layer's input norm, one kernel fewer).
struct MoeAddRmsNorm {
  void* residual = nullptr;  // [rows, hidden], rows residual_stride elements apart; none if null
  int64_t residual_stride = 0;
  const void* weight = nullptr;  // [hidden]
  float eps = 0.0f;
};

struct MoeExpertsArgs {
  DType dtype = DType::kBF16;
  const void* x = nullptr;  // [rows, hidden], rows x_stride elements apart
  int64_t x_stride = 0;
  const int32_t* ids = nullptr;    // [rows, top_k]
  const float* weights = nullptr;  // [rows, top_k]
  const void* gate_up = nullptr;   // [experts, 2 intermediate, hidden] contiguous
  const void* down = nullptr;      // [experts, hidden, intermediate] contiguous
  void* out = nullptr;             // [rows, hidden], rows out_stride elements apart (may be x)
  int64_t out_stride = 0;
  int64_t rows = 0;
  int64_t hidden = 0;
  int64_t intermediate = 0;  // >= 1
  int64_t experts = 0;       // 1 to kMoeMaxExperts
  int top_k = 0;
  MoeAddRmsNorm then;  // folded into the last step where residual is set
};

// The most experts moe_experts takes (moe_align counts them in shared memory).
inline constexpr int64_t kMoeMaxExperts = 2048;

// Bytes of device scratch moe_experts() needs for these sizes (of the pointers, only their
// alignment counts: it picks the path).
size_t moe_experts_scratch_bytes(const MoeExpertsArgs& args);

// out[t] = sum_j weights[t, j] * silu_mul(x[t] @ gate_up[e]^T) @ down[e]^T, e = ids[t, j]:
// the gate and up products rounded to dtype, the activation as silu_mul rounds it, each
// expert's down product rounded, times its weight and rounded again, the sum over j in f32
// rounded once; then args.then, where set. An id outside [0, experts) adds nothing.
// Deterministic: the bits depend on the inputs only (no float atomics), and each row's on its
// own inputs only, whatever the batch. `scratch` holds moe_experts_scratch_bytes(args) bytes,
// 256-byte aligned.
void moe_experts(const MoeExpertsArgs& args, void* scratch, cudaStream_t stream);

// ---- The stages of moe_experts ---------------------------------------------------------------

// The GEMMs' tile shapes: 16-row tiles of many narrow CTAs that stream each touched expert's
// weights once (decode batches); 32-row ones for the larger decode batches, where 16 rows would
// split many experts' runs over two tiles; or 128-row tiles that reuse the weights (prefill).
enum class MoeTiles { kDecode, kDecodeWide, kPrefill };

// Rows of a tile, the unit each expert's run of pairs is padded to.
int moe_tile_rows(MoeTiles tiles);

// The tile shape for `pairs` (rows * top_k) pairs over `experts` experts.
MoeTiles moe_tiles_for(int64_t pairs, int64_t experts);

// Whether the tensor-core path serves these operands (else the per-pair kernels do).
bool moe_tensor_cores_serve(const MoeExpertsArgs& args);

// What moe_align writes and the GEMMs read.
struct MoeTileMap {
  int32_t* sorted_pairs = nullptr;  // [max_tiles * tile_rows]: pair t * top_k + j, -1 = padding
  int32_t* tile_experts = nullptr;  // [max_tiles]: the expert of each tile
  int32_t* num_tiles = nullptr;     // [1]: tiles in use, <= max_tiles
  int64_t max_tiles = 0;
  int tile_rows = 0;
  // moe_align's own scratch, moe_align_scratch_ints() ints (none for small batches).
  int32_t* align_scratch = nullptr;
};

// An upper bound on the tiles of `pairs` pairs over `experts` experts.
int64_t moe_max_tiles(int64_t pairs, int64_t experts, int tile_rows);

// The ints of scratch moe_align needs for `pairs` pairs over `experts` experts.
int64_t moe_align_scratch_ints(int64_t pairs, int64_t experts);

// Groups the pairs p = t * top_k + j by expert ids[p] (ids outside [0, experts) are left out):
// each expert's pairs take consecutive slots from a multiple of tile_rows on, the rest of its
// last tile is padding. One CTA for a small batch; for a large one, three kernels (each chunk
// of pairs counted, the counts summed into the map, each chunk placed).
void moe_align(const int32_t* ids, int64_t pairs, int64_t experts, const MoeTileMap& map,
               cudaStream_t stream);

// What both grouped GEMMs take: the batch's sizes and moe_align's map of it.
struct MoeGemmArgs {
  DType dtype = DType::kBF16;  // bf16 or f16
  MoeTiles tiles = MoeTiles::kDecode;
  int64_t pairs = 0;
  int64_t experts = 0;
  int top_k = 0;
  int64_t hidden = 0;        // a multiple of 8
  int64_t intermediate = 0;  // a multiple of 8
  MoeTileMap map;
};

// act[s] = silu_mul(x[pair / top_k] @ gate_up[e]^T) for every slot s of the tiles, pair =
// map.sorted_pairs[s] (padding slots are left unwritten). x [rows, hidden], 16-byte aligned,
// x_stride a multiple of 8; gate_up [experts, 2 intermediate, hidden]; act [max_tiles *
// tile_rows, intermediate].
void moe_gate_up(const MoeGemmArgs& args, const void* x, int64_t x_stride, const void* gate_up,
                 void* act, cudaStream_t stream);

// weighted[pair] = round(round(act[s] @ down[e]^T) * weights[pair]) for every non-padding slot
// s. It must come right after moe_gate_up: it reads the map and starts loading the down weights
// while that one finishes. down [experts, hidden, intermediate]; weights f32 [pairs]; weighted
// [pairs, hidden].
void moe_down(const MoeGemmArgs& args, const void* act, const float* weights, const void* down,
              void* weighted, cudaStream_t stream);

// The same two products per pair, without tiles: act [pairs, intermediate] and weighted
// [pairs, hidden] by pair; pairs with an id outside [0, experts) are skipped. Any dtype, width
// and alignment.
void moe_gate_up_simt(DType dtype, const void* x, int64_t x_stride, const int32_t* ids,
                      int64_t pairs, int top_k, int64_t experts, const void* gate_up,
                      int64_t hidden, int64_t intermediate, void* act, cudaStream_t stream);
void moe_down_simt(DType dtype, const void* act, const int32_t* ids, const float* weights,
                   int64_t pairs, int64_t experts, const void* down, int64_t hidden,
                   int64_t intermediate, void* weighted, cudaStream_t stream);

// out[t] = round(sum over j in order of weighted[t * top_k + j]), the pairs whose id is outside
// [0, experts) left out (zeros when none is left), then `then` where set. weighted
// [rows * top_k, hidden].
void moe_combine(DType dtype, const void* weighted, const int32_t* ids, int64_t rows, int top_k,
                 int64_t experts, int64_t hidden, void* out, int64_t out_stride,
                 cudaStream_t stream, const MoeAddRmsNorm& then = {});

// out[t] = round(sum over j in order of round(y[pair_slots[p]] * weights[p])), p = t * top_k
// + j, the pairs whose id is outside [0, experts) left out (zeros when none is left): the
// combine of the Hopper path, whose down products y [slots, hidden] are by slot; then `then`
// where set.
void moe_combine_slots(DType dtype, const void* y, const int32_t* pair_slots, const int32_t* ids,
                       const float* weights, int64_t rows, int top_k, int64_t experts,
                       int64_t hidden, void* out, int64_t out_stride, cudaStream_t stream,
                       const MoeAddRmsNorm& then = {});

// ---- The Hopper path (bf16, prefill tiles; moe_cutlass.cu) -----------------------------------

// What moe_cutlass_experts takes: the batch (gemm.tiles kPrefill, gemm.dtype bf16) and its
// buffers, all 16-byte aligned; slots = gemm.map.max_tiles * gemm.map.tile_rows.
struct MoeCutlassArgs {
  MoeGemmArgs gemm;
  const int32_t* ids = nullptr;  // [pairs]
  const void* x = nullptr;       // [rows, hidden], rows x_stride (a multiple of 8) apart
  int64_t x_stride = 0;
  const void* gate_up = nullptr;  // [experts, 2 intermediate, hidden]
  const void* down = nullptr;     // [experts, hidden, intermediate]
  void* xs = nullptr;             // [slots, hidden]: x rows in slot order
  void* gu = nullptr;             // [slots, 2 intermediate]
  void* act = nullptr;            // [slots, intermediate]
  void* y = nullptr;              // [slots, hidden]: may be xs (read before y is written)
  int32_t* pair_slots = nullptr;  // [pairs]: the slot of each pair whose id is an expert
  void* scratch = nullptr;        // moe_cutlass_scratch_bytes(experts), 256-byte aligned
  // For moe_bench: the stages to run, of align, gather (sizes, pointers and x rows), gate_up,
  // silu_mul, down.
  int stages = 5;
};

// Bytes of the grouped GEMMs' device arrays and CUTLASS's workspace.
size_t moe_cutlass_scratch_bytes(int64_t experts);

// moe_align, then y[s] = round(silu_mul(x[pair / top_k] @ gate_up[e]^T) @ down[e]^T) for every
// slot s holding a pair (e its expert) and pair_slots; moe_combine_slots finishes the op.
// CUTLASS's sm90 grouped GEMMs (wgmma, TMA), sized on the device: no host sync.
void moe_cutlass_experts(const MoeCutlassArgs& args, cudaStream_t stream);

}  // namespace nanovllm::cuda
