// Paged attention on the GPU: host launchers for the prefill and decode kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda/elementwise/elementwise.h"

namespace nanovllm::cuda {

// One attention call over a paged KV cache. Query row t of sequence s sits at position
// context_lens[s] - q_len(s) + (t - cu_seqlens_q[s]) and attends causally to keys
// [0, that position] of s, read through block_tables. Rows of a sequence with context_len 0
// (padding in a captured decode batch) are written with zeros.
struct PagedAttentionArgs {
  DType dtype = DType::kBF16;     // of qkv, the caches and out (f32, bf16 or f16)
  const void* qkv = nullptr;      // [num_tokens, qkv_row_stride]; q heads start at column 0
  int64_t qkv_row_stride = 0;     // elements
  const void* k_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim]
  const void* v_cache = nullptr;  // same layout
  int64_t num_blocks = 0;         // of the caches; 0: unknown (the Hopper prefill's TMA needs it)
  void* out = nullptr;            // [num_tokens, out_row_stride]; num_heads * head_dim used
  int64_t out_row_stride = 0;     // elements
  const int32_t* cu_seqlens_q = nullptr;  // [num_seqs + 1]
  const int32_t* context_lens = nullptr;  // [num_seqs]
  const int32_t* block_tables = nullptr;  // [num_seqs, block_table_stride], -1 past the end
  int block_table_stride = 0;
  int num_seqs = 0;
  int num_tokens = 0;
  int max_seqlen_q = 0;  // 1 selects the decode kernel; its launch depends on num_seqs and
                         // max_seqlen_k only, so it can be captured once per batch size and
                         // replayed
  // The longest context_lens entry, or a bound on it (a decode launch captured once: the longest
  // context the engine admits); 0: unknown. Sets the decode kernel's split-KV factor.
  int max_seqlen_k = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  float scale = 1.0f;
  int num_sms = 0;  // multiprocessors of the device, for choosing the split-KV factor
  // Optional, decode: [num_seqs] the sequence each z-index of the grid serves (a permutation;
  // null: the batch order), the order in which the CTAs are dispatched.
  const int32_t* seq_order = nullptr;
  // Optional, bf16/f16 decode only: with qk_norm_rope.qkv set (to qkv), q and k in qkv are
  // still raw, and the kernel does what qk_norm_rope() with the KV store would have done first
  // (same rounding) on the fly: its output and the cache come out the same, qkv stays raw.
  // One kernel instead of two at every decode layer. A row's slot_mapping entry must be the
  // slot the block table gives position context - 1, as the engine's always is.
  QkNormRopeArgs qk_norm_rope;
};

// Throws Error when the kernels do not cover this geometry (head_dim 64 or 128, block sizes
// 16 to 256 that are multiples of 16, GQA groups 1 to 8, f32/bf16/f16).
void check_attention_support(int head_dim, int block_size, int num_heads, int num_kv_heads,
                             DType dtype);

// Throws Error naming the problem when args are not a valid call (geometry, sizes, null or
// misaligned pointers).
void check_paged_attention(const PagedAttentionArgs& args);

// Runs attention: no scratch, no allocation, so it can be captured in a CUDA graph.
void paged_attention(const PagedAttentionArgs& args, cudaStream_t stream);

}  // namespace nanovllm::cuda
