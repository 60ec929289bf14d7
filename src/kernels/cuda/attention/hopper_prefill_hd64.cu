// FlashInfer's sm90 paged prefill at head_dim 64, with its own tile sizes (192 query rows, 96
// keys a tile).
#include <flashinfer/attention/hopper/prefill_sm90.cuh>
#include <flashinfer/attention/hopper/variants.cuh>
#include <flashinfer/attention/mask.cuh>

#include "kernels/cuda/attention/hopper_prefill_kernels.cuh"

namespace nanovllm::cuda::hopper_prefill {

cudaError_t launch_head_dim_64(Params& params, cudaStream_t stream) {
  return flashinfer::BatchPrefillWithPagedKVCacheDispatched<
      64, 64, flashinfer::MaskMode::kCausal, /*LEFT_SLIDING_WINDOW=*/false,
      /*SAME_SCHEDULE_FOR_ALL_HEADS=*/false, flashinfer::StandardAttention>(
      params, /*enable_pdl=*/false, stream);
}

}  // namespace nanovllm::cuda::hopper_prefill
