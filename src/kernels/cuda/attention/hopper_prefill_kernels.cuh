// The launchers of FlashInfer's sm90 paged prefill kernels behind HopperPrefillAttention, one
// head_dim per file so that they build in parallel. Device code: include from .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cutlass/numeric_types.h>
#include <cstdint>
#include <flashinfer/attention/hopper/default_params.cuh>

namespace nanovllm::cuda::hopper_prefill {

using Params = flashinfer::BatchPrefillPagedParams<cutlass::bfloat16_t, cutlass::bfloat16_t,
                                                   cutlass::bfloat16_t, int32_t>;

// Causal attention over the planned work list of params. Query tiles of 128 rows at head_dim
// 128 and 192 at head_dim 64, as FlashInfer's plan cuts them.
cudaError_t launch_head_dim_64(Params& params, cudaStream_t stream);
cudaError_t launch_head_dim_128(Params& params, cudaStream_t stream);

// The same at head_dim 128 with K/V tiles of 128 keys brought in by TMA (hopper_paged_tma.cuh):
// blocks of a multiple of 128 tokens in a cache of `num_slots` slots.
cudaError_t launch_head_dim_128_paged_tma(Params& params, int64_t num_slots, cudaStream_t stream);

}  // namespace nanovllm::cuda::hopper_prefill
