// Sampling on the GPU, following kernels/sampling_math.h exactly. Batches too small to fill the
// GPU with one CTA per row split their rows over several CTAs (sample_chunked.h); larger ones
// take one CTA per row here (the draw itself is sample_draw.cuh's).
#include <cmath>

#include "kernels/cuda/runtime/launch.cuh"
#include "kernels/cuda/sampling/sample_chunked.h"
#include "kernels/cuda/sampling/sample_draw.cuh"
#include "kernels/cuda/sampling/sampling.h"
#include "kernels/cuda/sampling/sampling_select.cuh"
#include "kernels/sampling_math.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm::cuda {
namespace {

constexpr float kGreedyTemperature = SamplingParams::kGreedyTemperature;

__global__ void __launch_bounds__(select::kSelectThreads, 2) sample_kernel(SamplingArgs args) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  __shared__ select::SelectShared sh;
  const int64_t r = blockIdx.x;
  const int vocab = static_cast<int>(args.vocab);
  const float* row = args.logits + r * args.vocab;
  if (threadIdx.x == 0) sh.compacted = 0;  // published by the barriers in row_max_key

  const unsigned long long max_key = select::row_max_key(row, vocab, sh);
  int32_t token = -1;
  if (!sampling::all_nan(max_key)) {
    token = sampling::token_of_key(max_key);
    const float max_logit = sampling::logit_of_key(max_key);
    const float temperature = args.temperature[r];
    if (!(temperature < kGreedyTemperature) && isfinite(max_logit)) {
      const draw::RowDraw rd{max_logit, sampling::reciprocal(temperature),
                             static_cast<uint64_t>(args.seed[r]), args.position[r]};
      token = draw::draw_token(row, vocab, max_key, args.top_k[r], args.top_p[r], rd, sh);
    }
  }
  if (threadIdx.x == 0) args.token_ids[r] = token;
}

// The current device's SM count (a cached attribute in the runtime, cheap to ask each call).
int sm_count() {
  int device = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&device));
  int count = 0;
  NVLLM_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

}  // namespace

size_t sample_workspace_bytes(int64_t rows, int64_t vocab) {
  if (rows <= 0 || vocab <= 0 || vocab > sampling::kMaxVocabulary) return 0;
  return chunked_workspace_bytes(rows, plan_chunks(rows, vocab, sm_count()));
}

void sample(const SamplingArgs& args, void* workspace, cudaStream_t stream) {
  NVLLM_CHECK_MSG(args.vocab > 0 && args.vocab <= sampling::kMaxVocabulary,
                  "sampling over a vocabulary of {} tokens: expected 1 to {}", args.vocab,
                  sampling::kMaxVocabulary);
  NVLLM_CHECK_MSG(args.rows >= 0 && args.rows <= INT32_MAX, "sampling {} rows", args.rows);
  if (args.rows == 0) return;
  const ChunkPlan plan = plan_chunks(args.rows, args.vocab, sm_count());
  if (plan.chunks > 1) {
    sample_chunked(args, plan, workspace, stream);
    return;
  }
  launch_kernel(sample_kernel, static_cast<unsigned>(args.rows), select::kSelectThreads, 0, stream,
                args);
}

}  // namespace nanovllm::cuda
