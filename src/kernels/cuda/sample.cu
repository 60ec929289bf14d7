// Sampling on the GPU: one CTA per row, following kernels/sampling_math.h exactly.
//   greedy: the largest rank key;
//   untruncated: one pass of the race, 4 tokens per Philox block, skipping tokens too unlikely
//     to win (cull_bound) so most of the vocabulary costs no random numbers;
//   top-k / top-p: radix selects find the kept set's threshold key, then the race over it.
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling_ops.h"
#include "kernels/cuda/sampling_select.cuh"
#include "kernels/sampling_math.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm::cuda {
namespace {

using select::SelectQuery;
using select::SelectShared;

constexpr float kGreedyTemperature = SamplingParams::kGreedyTemperature;

// One row's drawing controls (block-uniform).
struct RowDraw {
  float max_logit;
  float inv_temperature;
  uint64_t seed;
  int32_t position;
};

// The race over the row's tokens with key >= threshold (0: all of them).
__device__ int32_t race_over_row(const float* row, int vocab, unsigned long long threshold,
                                 const RowDraw& draw, SelectShared& sh) {
  unsigned long long winner = 0;
  float best = -__builtin_huge_valf();
  select::for_each_group(row, vocab, [&](int group, const float(&logits)[4], int n) {
    const float bound = sampling::cull_bound(best);
    bool live[4];
    bool any = false;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      live[j] = j < n && !((logits[j] - draw.max_logit) * draw.inv_temperature < bound) &&
                (threshold == 0 || sampling::rank_key(logits[j], 4 * group + j) >= threshold);
      any = any || live[j];
    }
    if (!any) return;
    const sampling::Philox4 block =
        sampling::random_block(draw.seed, draw.position, static_cast<uint32_t>(group));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (!live[j]) continue;
      const float score =
          sampling::gumbel_score(logits[j], draw.max_logit, draw.inv_temperature, block.x[j]);
      const unsigned long long key = sampling::rank_key(score, 4 * group + j);
      if (key > winner) {
        winner = key;
        best = score;
      }
    }
  });
  return sampling::token_of_key(select::block_max_u64(winner, sh));
}

// The race over the keys copied to shared memory that are >= threshold.
__device__ int32_t race_over_copy(unsigned long long threshold, const RowDraw& draw,
                                  SelectShared& sh) {
  unsigned long long winner = 0;
  float best = -__builtin_huge_valf();
  const int num =
      static_cast<int>(min(sh.num_candidates, static_cast<uint32_t>(select::kCandidateCapacity)));
  for (int i = threadIdx.x; i < num; i += select::kSelectThreads) {
    const unsigned long long key = sh.candidates[i];
    if (key < threshold) continue;
    const float logit = sampling::logit_of_key(key);
    if ((logit - draw.max_logit) * draw.inv_temperature < sampling::cull_bound(best)) continue;
    const int32_t token = sampling::token_of_key(key);
    const float score =
        sampling::gumbel_score(logit, draw.max_logit, draw.inv_temperature,
                               sampling::random_word(draw.seed, draw.position, token));
    const unsigned long long race_key = sampling::rank_key(score, token);
    if (race_key > winner) {
      winner = race_key;
      best = score;
    }
  }
  return sampling::token_of_key(select::block_max_u64(winner, sh));
}

// A random draw from a row whose largest key is max_key (finite logit, temperature not greedy).
__device__ int32_t draw_token(const float* row, int vocab, unsigned long long max_key,
                              int32_t top_k, float top_p, const RowDraw& draw, SelectShared& sh) {
  const bool use_top_k = top_k > 0 && top_k < vocab;
  const bool use_top_p = top_p < 1.0f;
  if (!use_top_k && !use_top_p) return race_over_row(row, vocab, 0, draw, sh);

  unsigned long long floor = 0;  // the top-k set: keys >= floor
  if (use_top_k) {
    if (top_k == 1) {
      floor = max_key;
    } else {
      SelectQuery query;
      query.universe_count = static_cast<uint32_t>(vocab);
      query.count = static_cast<unsigned long long>(top_k);
      floor = select::radix_select(row, vocab, query, sh);
    }
  }
  unsigned long long threshold = floor;
  if (use_top_p && floor != max_key) {
    SelectQuery query;
    query.by_mass = true;
    query.floor = floor;
    query.universe_count = static_cast<uint32_t>(use_top_k ? top_k : vocab);
    query.top_p = top_p;
    query.first_key = max_key;
    query.max_logit = draw.max_logit;
    query.inv_temperature = draw.inv_temperature;
    threshold = select::radix_select(row, vocab, query, sh);
  }
  if (threshold == max_key) return sampling::token_of_key(max_key);
  return sh.compacted ? race_over_copy(threshold, draw, sh)
                      : race_over_row(row, vocab, threshold, draw, sh);
}

__global__ void __launch_bounds__(select::kSelectThreads, 2) sample_kernel(SamplingArgs args) {
  __shared__ SelectShared sh;
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
      const RowDraw draw{max_logit, sampling::reciprocal(temperature),
                         static_cast<uint64_t>(args.seed[r]), args.position[r]};
      token = draw_token(row, vocab, max_key, args.top_k[r], args.top_p[r], draw, sh);
    }
  }
  if (threadIdx.x == 0) args.token_ids[r] = token;
}

}  // namespace

size_t sample_workspace_bytes(int64_t rows, int64_t vocab) {
  (void)rows;
  (void)vocab;
  return 0;
}

void sample(const SamplingArgs& args, void* workspace, cudaStream_t stream) {
  (void)workspace;
  NVLLM_CHECK_MSG(args.vocab > 0 && args.vocab <= sampling::kMaxVocabulary,
                  "sampling over a vocabulary of {} tokens: expected 1 to {}", args.vocab,
                  sampling::kMaxVocabulary);
  NVLLM_CHECK_MSG(args.rows >= 0 && args.rows <= INT32_MAX, "sampling {} rows", args.rows);
  if (args.rows == 0) return;
  sample_kernel<<<static_cast<unsigned>(args.rows), select::kSelectThreads, 0, stream>>>(args);
  NVLLM_CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::cuda
