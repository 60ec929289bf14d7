// f32 paged attention on CUDA cores for any query length: the path that is compared with the
// fp32 goldens token for token, so it favours being plainly right over being fast. One warp
// computes one (query row, head) with an online softmax over the keys, one key at a time.
#include <cmath>

#include "core/check.h"
#include "kernels/cuda/attention/attention_launch.cuh"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda::attention {
namespace {

constexpr int kWarpsPerBlock = 4;  // heads handled by one block, one per warp

// The sequence whose query rows [cu[s], cu[s + 1]) contain `row` (cu[num_seqs] > row).
__device__ int sequence_of_row(const int32_t* cu_seqlens_q, int num_seqs, int row) {
  int lo = 0;
  int hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (cu_seqlens_q[mid + 1] > row) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// grid (num_tokens, ceil(num_heads / kWarpsPerBlock)), block kWarpsPerBlock warps.
template <int kHeadDim>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    attention_f32_kernel(const PagedAttentionArgs args) {
  start_after_prior_kernels();
  constexpr int kPerLane = kHeadDim / 32;  // dims of a head held by each lane: lane + 32 * i
  const int row = blockIdx.x;
  const int lane = threadIdx.x % 32;
  const int head = blockIdx.y * kWarpsPerBlock + threadIdx.x / 32;
  if (head >= args.num_heads) return;

  const int seq = sequence_of_row(args.cu_seqlens_q, args.num_seqs, row);
  const int q_begin = args.cu_seqlens_q[seq];
  const int q_len = args.cu_seqlens_q[seq + 1] - q_begin;
  // Keys [0, position]; a padding row (context 0) has none and is written with zeros.
  const int num_keys = args.context_lens[seq] - q_len + (row - q_begin) + 1;
  const int kv_head = head / (args.num_heads / args.num_kv_heads);

  const float* q = static_cast<const float*>(args.qkv) +
                   static_cast<int64_t>(row) * args.qkv_row_stride +
                   static_cast<int64_t>(head) * kHeadDim;
  float q_reg[kPerLane];
  float acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    q_reg[i] = q[lane + 32 * i];
    acc[i] = 0.0f;
  }

  const float* k_cache = static_cast<const float*>(args.k_cache);
  const float* v_cache = static_cast<const float*>(args.v_cache);
  const int32_t* block_table =
      args.block_tables + static_cast<int64_t>(seq) * args.block_table_stride;
  const int64_t slot_stride = static_cast<int64_t>(args.num_kv_heads) * kHeadDim;
  float running_max = -INFINITY;
  float denominator = 0.0f;
  for (int j = 0; j < num_keys; ++j) {
    const int64_t slot = static_cast<int64_t>(block_table[j / args.block_size]) * args.block_size +
                         j % args.block_size;
    const int64_t base = slot * slot_stride + static_cast<int64_t>(kv_head) * kHeadDim + lane;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) dot += q_reg[i] * k_cache[base + 32 * i];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    }
    const float score = dot * args.scale;
    const float new_max = fmaxf(running_max, score);
    const float correction = expf(running_max - new_max);  // 0 for the first key
    const float p = expf(score - new_max);
    denominator = denominator * correction + p;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] = acc[i] * correction + p * v_cache[base + 32 * i];
    running_max = new_max;
  }

  const float inv = num_keys > 0 ? 1.0f / denominator : 0.0f;
  float* out = static_cast<float*>(args.out) + static_cast<int64_t>(row) * args.out_row_stride +
               static_cast<int64_t>(head) * kHeadDim;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) out[lane + 32 * i] = acc[i] * inv;
}

}  // namespace

void launch_attention_f32(const PagedAttentionArgs& args, cudaStream_t stream) {
  const dim3 grid(args.num_tokens, (args.num_heads + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const dim3 block(kWarpsPerBlock * 32);
  switch (args.head_dim) {
    case 64:
      launch_kernel(attention_f32_kernel<64>, grid, block, 0, stream, args);
      break;
    case 128:
      launch_kernel(attention_f32_kernel<128>, grid, block, 0, stream, args);
      break;
    default:
      NVLLM_CHECK_MSG(false, "f32 attention: unsupported head_dim {}", args.head_dim);
  }
}

}  // namespace nanovllm::cuda::attention
