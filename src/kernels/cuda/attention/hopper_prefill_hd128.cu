// FlashInfer's sm90 paged prefill at head_dim 128: 128 query rows by 128 keys a tile, two
// stages. FlashInfer's own choice for paged K/V is 96 keys; 128 measured 2 to 5% faster on
// causal prompts of 4k to 32k tokens (H200, docs/BENCHMARKS.md). The same tiles with K/V by
// TMA (hopper_paged_tma.cuh) serve blocks of whole tiles.
#include <flashinfer/attention/hopper/prefill_sm90.cuh>
#include <flashinfer/attention/hopper/variants.cuh>
#include <flashinfer/attention/mask.cuh>

#include "kernels/cuda/attention/hopper_paged_tma.cuh"
#include "kernels/cuda/attention/hopper_prefill_kernels.cuh"

namespace nanovllm::cuda::hopper_prefill {

cudaError_t launch_head_dim_128(Params& params, cudaStream_t stream) {
  using Bf16 = cutlass::bfloat16_t;
  using Traits = flashinfer::AttentionKernelTraits<
      /*USE_TMA_LOAD_KV=*/false, /*HEAD_DIM_QK=*/128, /*HEAD_DIM_VO=*/128, /*CTA_Q=*/128,
      /*CTA_KV=*/128, /*NUM_STAGES=*/2, Bf16, Bf16, Bf16, int32_t, flashinfer::StandardAttention>;
  const cudaError_t status = flashinfer::BatchPrefillWithPagedKVCacheKernelTraitsDispatched<
      Traits, /*LEFT_SLIDING_WINDOW=*/false, /*CAUSAL=*/true,
      /*SAME_SCHEDULE_FOR_ALL_HEADS=*/false, Params>(params, stream);
  return status != cudaSuccess ? status : cudaGetLastError();
}

cudaError_t launch_head_dim_128_paged_tma(Params& params, int64_t num_slots, cudaStream_t stream) {
  using Bf16 = cutlass::bfloat16_t;
  using Traits = flashinfer::AttentionKernelTraits<
      /*USE_TMA_LOAD_KV=*/true, /*HEAD_DIM_QK=*/128, /*HEAD_DIM_VO=*/128, /*CTA_Q=*/128,
      /*CTA_KV=*/128, /*NUM_STAGES=*/2, Bf16, Bf16, Bf16, int32_t, flashinfer::StandardAttention>;
  const cudaError_t status = launch_paged_tma<Traits>(params, num_slots, stream);
  return status != cudaSuccess ? status : cudaGetLastError();
}

}  // namespace nanovllm::cuda::hopper_prefill
