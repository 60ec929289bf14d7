// Host launchers of the row-wise CUDA kernels (everything but GEMMs, attention and sampling).
// Each takes device pointers, sizes and row strides (in elements), enqueues its kernel on
// `stream` and returns; `dtype` (f32, bf16 or f16) is the type of every floating tensor except
// the f32 rotary table. Math is fp32. Kernels cannot throw, so ids, positions and slots outside
// their range are handled as each launcher says; the Backend checks everything else first.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace nanovllm::cuda {

// out = weight * round(x * rsqrt(mean(x^2) + eps)) per row, rounding to dtype as HF's Qwen3
// RMSNorm does. x, out [rows, hidden] (out may be x); weight [hidden].
void rms_norm(DType dtype, const void* x, int64_t x_stride, const void* weight, float eps,
              int64_t rows, int64_t hidden, void* out, int64_t out_stride, cudaStream_t stream);

// residual = round(x + residual); x = rms_norm(residual) * weight, both in place.
// x, residual [rows, hidden] (distinct); weight [hidden].
void add_rms_norm(DType dtype, void* x, int64_t x_stride, void* residual, int64_t residual_stride,
                  const void* weight, float eps, int64_t rows, int64_t hidden, cudaStream_t stream);

struct QkNormRopeArgs {
  DType dtype = DType::kBF16;
  void* qkv = nullptr;  // [tokens, qkv_stride]: q heads, then k heads, then v heads
  int64_t qkv_stride = 0;
  int64_t tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;                    // even
  const void* q_norm = nullptr;        // [head_dim]; both null: no norm, rotary only
  const void* k_norm = nullptr;        // [head_dim]
  const int32_t* positions = nullptr;  // [tokens]
  const float* cos_sin = nullptr;      // f32 [max_positions, head_dim]: cos half, then sin half
  int64_t max_positions = 0;
  float eps = 1e-6f;
  // Optional: also store each token's k (after rotary) and v heads into the paged cache, as
  // store_kv does (slot -1 or outside [0, num_slots) skipped). Null k_cache: no store.
  const int32_t* slot_mapping = nullptr;  // [tokens]
  int64_t num_slots = 0;                  // num_blocks * block_size
  void* k_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim] contiguous
  void* v_cache = nullptr;  // same layout
};

// Per token, per q and k head: RMSNorm over head_dim with q_norm / k_norm (where set), then neox
// rotary embedding at the token's position, in place; then, when args.k_cache is set, the k and v
// heads go to the cache. A position outside [0, max_positions) writes zeros to that token's q
// and k heads (the engine never passes one).
void qk_norm_rope(const QkNormRopeArgs& args, cudaStream_t stream);

struct StoreKvArgs {
  DType dtype = DType::kBF16;
  const void* qkv = nullptr;  // [tokens, qkv_stride]: q heads, then k heads, then v heads
  int64_t qkv_stride = 0;
  int64_t tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  const int32_t* slot_mapping = nullptr;  // [tokens]; slot = block * block_size + offset
  int64_t num_slots = 0;                  // num_blocks * block_size
  void* k_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim] contiguous
  void* v_cache = nullptr;  // same layout
};

// Copies the k and v heads of each token to its cache slot. Slot -1 is skipped, and so is any
// slot outside [0, num_slots) (the engine never passes one).
void store_kv(const StoreKvArgs& args, cudaStream_t stream);

// x = round(x + bias) on every row: a linear's bias. x [rows, width]; bias [width].
void add_bias(DType dtype, const void* bias, int64_t rows, int64_t width, void* x, int64_t x_stride,
              cudaStream_t stream);

// out = round(silu(gate)) * up, gate_up = [gate | up]. gate_up [rows, 2 width]; out [rows, width].
void silu_mul(DType dtype, const void* gate_up, int64_t gate_up_stride, int64_t rows, int64_t width,
              void* out, int64_t out_stride, cudaStream_t stream);

// out[i, :] = x[indices[i] - first_index, :] (also the embedding lookup, x being the weight or
// one rank's shard of it). x [x_rows, width]; out [count, width]. An index outside
// [first_index, first_index + x_rows) writes a zero row: another rank's shard, or a bad index
// (the engine validates token ids and never passes one).
void gather_rows(DType dtype, const void* x, int64_t x_stride, int64_t x_rows,
                 const int32_t* indices, int64_t first_index, int64_t count, int64_t width,
                 void* out, int64_t out_stride, cudaStream_t stream);

}  // namespace nanovllm::cuda
