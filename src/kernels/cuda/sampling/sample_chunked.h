// Sampling with each row split over several CTAs, for batches too small to fill the GPU with one
// CTA per row. Rows with top-k / top-p still take one CTA each (inside the same kernels).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/sampling/sampling.h"

namespace nanovllm::cuda {

// A row as `chunks` ranges of `groups_per_chunk` groups of 4 tokens (the last one may be
// shorter, none is empty), so a Philox block never straddles two chunks.
struct ChunkPlan {
  int chunks = 1;  // 1: not worth splitting; one CTA per row
  int groups_per_chunk = 0;
};

ChunkPlan plan_chunks(int64_t rows, int64_t vocab, int num_sms);
size_t chunked_workspace_bytes(int64_t rows, const ChunkPlan& plan);
// Needs plan.chunks > 1 and chunked_workspace_bytes(args.rows, plan) bytes of workspace.
void sample_chunked(const SamplingArgs& args, const ChunkPlan& plan, void* workspace,
                    cudaStream_t stream);

}  // namespace nanovllm::cuda
