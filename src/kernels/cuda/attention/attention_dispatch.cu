// paged_attention(): checks the arguments once, then picks the kernel family: f32 on CUDA
// cores; bf16/f16 prefill (max_seqlen_q > 1) or decode (max_seqlen_q == 1) on tensor cores.
#include <fmt/format.h>

#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/attention_launch.cuh"
#include "kernels/cuda/runtime/alignment.h"

namespace nanovllm::cuda {

void check_attention_support(int head_dim, int block_size, int num_heads, int num_kv_heads,
                             DType dtype) {
  if (head_dim != 64 && head_dim != 128) {
    throw Error(fmt::format("CUDA attention supports head_dim 64 and 128, not {}", head_dim));
  }
  if (block_size < 16 || block_size > 256 || block_size % 16 != 0) {
    throw Error(fmt::format(
        "CUDA attention supports KV block sizes that are multiples of 16 in [16, 256], not {}",
        block_size));
  }
  if (num_heads <= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0) {
    throw Error(
        fmt::format("CUDA attention needs num_heads ({}) a positive multiple of "
                    "num_kv_heads ({})",
                    num_heads, num_kv_heads));
  }
  const int group = num_heads / num_kv_heads;
  if (group > 8) {
    throw Error(
        fmt::format("CUDA attention supports 1 to 8 query heads per kv head, not {} "
                    "({} heads over {} kv heads)",
                    group, num_heads, num_kv_heads));
  }
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16) {
    throw Error(
        fmt::format("CUDA attention supports f32, bf16 and f16, not {}", dtype_name(dtype)));
  }
}

void check_paged_attention(const PagedAttentionArgs& args) {
  check_attention_support(args.head_dim, args.block_size, args.num_heads, args.num_kv_heads,
                          args.dtype);
  NVLLM_CHECK_GE(args.num_seqs, 0);
  NVLLM_CHECK_GE(args.num_tokens, 0);
  if (args.num_seqs == 0 || args.num_tokens == 0) return;
  NVLLM_CHECK_MSG(args.num_seqs <= 65535, "attention batch of {} sequences is over 65535",
                  args.num_seqs);
  NVLLM_CHECK_GE(args.max_seqlen_q, 1);
  NVLLM_CHECK(args.qkv != nullptr && args.k_cache != nullptr && args.v_cache != nullptr &&
              args.out != nullptr);
  NVLLM_CHECK(args.cu_seqlens_q != nullptr && args.context_lens != nullptr &&
              args.block_tables != nullptr);
  NVLLM_CHECK_GT(args.block_table_stride, 0);
  NVLLM_CHECK_GE(args.qkv_row_stride, static_cast<int64_t>(args.num_heads) * args.head_dim);
  NVLLM_CHECK_GE(args.out_row_stride, static_cast<int64_t>(args.num_heads) * args.head_dim);

  const QkNormRopeArgs& fused = args.qk_norm_rope;
  if (fused.qkv != nullptr) {
    NVLLM_CHECK_MSG(args.max_seqlen_q == 1 && args.dtype != DType::kF32,
                    "attention: the q/k norm is fused in bf16/f16 decode only");
    NVLLM_CHECK(fused.qkv == args.qkv && fused.qkv_stride == args.qkv_row_stride &&
                fused.tokens == args.num_tokens && fused.dtype == args.dtype &&
                fused.num_heads == args.num_heads && fused.num_kv_heads == args.num_kv_heads &&
                fused.head_dim == args.head_dim && fused.k_cache == args.k_cache &&
                fused.v_cache == args.v_cache);
    NVLLM_CHECK((fused.q_norm != nullptr) == (fused.k_norm != nullptr) &&
                fused.positions != nullptr && fused.cos_sin != nullptr &&
                fused.slot_mapping != nullptr);
  }
  if (args.dtype == DType::kF32) return;
  // The tensor-core kernels move 16-byte pieces of q and the caches and store pairs of outputs.
  NVLLM_CHECK_MSG(aligned_to(args.qkv, 16) && args.qkv_row_stride % 8 == 0,
                  "attention qkv must be 16-byte aligned with a row stride that is a multiple "
                  "of 8 elements (stride {})",
                  args.qkv_row_stride);
  NVLLM_CHECK_MSG(aligned_to(args.k_cache, 16) && aligned_to(args.v_cache, 16),
                  "attention KV caches must be 16-byte aligned");
  NVLLM_CHECK_MSG(aligned_to(args.out, 4) && args.out_row_stride % 2 == 0,
                  "attention out must be 4-byte aligned with an even row stride (stride {})",
                  args.out_row_stride);
}

void paged_attention(const PagedAttentionArgs& args, cudaStream_t stream) {
  check_paged_attention(args);
  if (args.num_seqs == 0 || args.num_tokens == 0) return;
  if (args.dtype == DType::kF32) {
    attention::launch_attention_f32(args, stream);
  } else if (args.max_seqlen_q == 1) {
    attention::launch_attention_decode(args, stream);
  } else {
    attention::launch_attention_prefill(args, stream);
  }
}

}  // namespace nanovllm::cuda
