// Host launchers behind paged_attention(), one per kernel family; the arguments are checked by
// paged_attention() before any of these runs.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/attention/attention.h"

namespace nanovllm::cuda::attention {

// f32, any query length: CUDA cores, one warp per (query row, head).
void launch_attention_f32(const PagedAttentionArgs& args, cudaStream_t stream);

// bf16/f16 with max_seqlen_q > 1: FlashAttention-2 style on tensor cores.
void launch_attention_prefill(const PagedAttentionArgs& args, cudaStream_t stream);

// bf16/f16 with max_seqlen_q == 1: the KV-splitting factor, which depends only on num_seqs,
// num_kv_heads, num_sms and the bound max_seqlen_k, so that a captured launch stays valid for
// any context lengths.
int decode_num_splits(const PagedAttentionArgs& args);
void launch_attention_decode(const PagedAttentionArgs& args, cudaStream_t stream);
// The same with the keys split `num_splits` ways (1 to 8) whatever decode_num_splits says, for
// the benchmark that sweeps it (attention_bench --splits).
void launch_attention_decode(const PagedAttentionArgs& args, int num_splits, cudaStream_t stream);

}  // namespace nanovllm::cuda::attention
