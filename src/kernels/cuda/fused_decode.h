// Every decoder layer of a small decode batch in one persistent kernel (bf16/f16).
//
// At batch 1 a decode step is a chain of ~250 short kernels, each paying a launch, a ramp-up
// and a drain; the weights are only 0.4 ms of it. Here one CTA per SM runs the whole stack:
// a producer warp streams the CTA's rows of every weight matrix, layer after layer, into a
// shared-memory ring with bulk copies, and the consumer warps compute each phase (q/k/v
// projection, attention, output projection, gate/up with SiLU, down projection) on their rows
// with the tensor cores. Phases hand their outputs to the CTAs that read them as tagged words
// (fused_decode_sync.cuh), so a CTA waits only for the words it needs; there is no grid-wide
// barrier. Residual adds and RMSNorms are done by every CTA on its own copy of the residual
// stream; intermediate rounding matches the separate kernels.
//
// Measured on an H100 it is slower than the separate kernels (docs/BENCHMARKS.md): each of a
// layer's five dependent hops costs a few microseconds, mostly waiting for the slowest CTA of
// the phase before. The engine runs it only when NANOVLLM_FUSED_DECODE=1.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace nanovllm::cuda {

// One layer's weights and KV cache, device pointers.
struct FusedDecodeLayer {
  const void* input_norm = nullptr;    // [hidden]
  const void* qkv_proj = nullptr;      // [(heads + 2 kv_heads) * head_dim, hidden]
  const void* q_norm = nullptr;        // [head_dim]
  const void* k_norm = nullptr;        // [head_dim]
  const void* o_proj = nullptr;        // [hidden, heads * head_dim]
  const void* post_norm = nullptr;     // [hidden]
  const void* gate_up_proj = nullptr;  // [2 intermediate, hidden]: gate rows, then up rows
  const void* down_proj = nullptr;     // [hidden, intermediate]
  void* k_cache = nullptr;             // [num_blocks, block_size, kv_heads, head_dim]
  void* v_cache = nullptr;             // same layout
};

// The most layers one launch takes (its parameters carry every layer's pointers).
inline constexpr int kFusedDecodeMaxLayers = 128;
// The most decode rows (sequences) one launch takes.
inline constexpr int kFusedDecodeMaxRows = 8;

struct FusedDecodeShape {
  DType dtype = DType::kBF16;
  int num_layers = 0;
  int rows = 0;  // decode rows, one query token each
  int hidden = 0;
  int intermediate = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;  // of the paged cache
};

struct FusedDecodeArgs {
  FusedDecodeShape shape;
  FusedDecodeLayer layers[kFusedDecodeMaxLayers];
  float eps = 1e-6f;                   // of every RMSNorm
  float scale = 1.0f;                  // attention softmax scale
  const void* embed_tokens = nullptr;  // [vocab, hidden]
  int64_t vocab = 0;
  const int32_t* input_ids = nullptr;     // [rows]; an id outside the vocabulary embeds as zeros
  const int32_t* positions = nullptr;     // [rows]
  const int32_t* context_lens = nullptr;  // [rows], this step's key included; 0 = padding row
  const int32_t* block_tables = nullptr;  // [rows, block_table_stride]
  int block_table_stride = 0;
  const int32_t* slot_mapping = nullptr;  // [rows]: this step's cache slot, -1 = none
  int64_t num_slots = 0;                  // num_blocks * block_size
  const float* cos_sin = nullptr;         // [max_positions, head_dim]
  int64_t max_positions = 0;
  void* hidden_out = nullptr;    // [rows, hidden]: the last layer's MLP output
  void* residual_out = nullptr;  // [rows, hidden]: the residual stream before it is added
  void* scratch = nullptr;       // fused_decode_scratch_bytes(), zeroed before the first use
  // Optional, for benchmarks: where each CTA's time goes. Thread 0 of each CTA writes
  // [1 + layers * kFusedDecodeEvents] entries (zeroed by the caller): its start, then per layer
  // the FusedDecodeEvent entries. The timeline is the global timer, in nanoseconds.
  uint64_t* timeline = nullptr;
};

// Timeline entries of one layer: the time each step of a phase ended, except *RingWait, the
// nanoseconds the phase waited for its weights to land. "Input" ends once the words the phase
// reads have arrived (and, for the projections after it, the norm is done). The attention
// entries stay 0 on a CTA without attention work.
enum FusedDecodeEvent {
  kQkvInput,  // the previous MLP output arrived, input norm done
  kQkvDone,   // q/k/v projection written
  kQkvRingWait,
  kAttnQuery,  // (last work item) its q/k/v arrived, q/k normalized and rotated
  kAttnDone,   // every work item written
  kOInput,     // attention output arrived (splits merged)
  kODone,
  kORingWait,
  kMlpInput,  // o_proj output arrived, post-attention norm done
  kMlpDone,   // gate/up projections and SiLU written
  kMlpRingWait,
  kDownInput,  // SiLU output arrived
  kDownDone,
  kDownRingWait,
  kFusedDecodeEvents
};

// Whether fused_decode() serves this shape on the current device: bf16/f16, head_dim 64 or
// 128, 1 to 8 query heads per kv head, 1 to kFusedDecodeMaxRows rows, at most
// kFusedDecodeMaxLayers layers, every matrix row a multiple of 16 bytes, and the per-CTA
// buffers within the device's shared memory.
bool fused_decode_supported(const FusedDecodeShape& shape);

// Device scratch a launch of this shape with any number of rows needs: every layer's
// intermediate activations and attention partials as tagged words, and the launch counter
// the tags come from. Zeroed once, when allocated (zero is no launch's tag); launches of any
// batch size share it.
size_t fused_decode_scratch_bytes(const FusedDecodeShape& shape);

// Enqueues the kernel (no allocation, so it can be captured in a graph).
void fused_decode(const FusedDecodeArgs& args, cudaStream_t stream);

}  // namespace nanovllm::cuda
