// The random draw of kernels/sampling_math.h on the GPU, for a row whose largest rank key is
// known: one pass of the race, 4 tokens per Philox block, skipping tokens too unlikely to win
// (cull_bound) so most of the vocabulary costs no random numbers; with top-k / top-p, radix
// selects find the kept set's threshold key first. Shared by the per-row and chunked kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/sampling/sampling_select.cuh"
#include "kernels/sampling_math.h"

namespace nanovllm::cuda::draw {

// One row's drawing controls (block-uniform).
struct RowDraw {
  float max_logit;
  float inv_temperature;
  uint64_t seed;
  int32_t position;
};

__device__ __forceinline__ bool uses_top_k(int32_t top_k, int vocab) {
  return top_k > 0 && top_k < vocab;
}

__device__ __forceinline__ bool uses_top_p(float top_p) {
  return top_p < 1.0f;
}

// The race's best rank key (score, token) over the tokens of groups [group_begin, group_end) with
// key >= threshold (0: all of them); 0 when every token there is culled. Culled tokens score
// below the row's winner whichever range culled them, so the best over ranges is the row's.
__device__ inline unsigned long long race_key_over_groups(const float* row, int vocab,
                                                          int group_begin, int group_end,
                                                          unsigned long long threshold,
                                                          const RowDraw& draw,
                                                          select::SelectShared& sh) {
  unsigned long long winner = 0;
  float best = -__builtin_huge_valf();
  select::for_each_group_in(
      row, vocab, group_begin, group_end, [&](int group, const float(&logits)[4], int n) {
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
  return select::block_max_u64(winner, sh);
}

// The race over the row's tokens with key >= threshold (0: all of them).
__device__ inline int32_t race_over_row(const float* row, int vocab, unsigned long long threshold,
                                        const RowDraw& draw, select::SelectShared& sh) {
  return sampling::token_of_key(
      race_key_over_groups(row, vocab, 0, select::num_groups_of(vocab), threshold, draw, sh));
}

// The race over the keys copied to shared memory that are >= threshold.
__device__ inline int32_t race_over_copy(unsigned long long threshold, const RowDraw& draw,
                                         select::SelectShared& sh) {
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
// sh.compacted must be 0 and visible to the whole block.
__device__ inline int32_t draw_token(const float* row, int vocab, unsigned long long max_key,
                                     int32_t top_k, float top_p, const RowDraw& draw,
                                     select::SelectShared& sh) {
  const bool use_top_k = uses_top_k(top_k, vocab);
  const bool use_top_p = uses_top_p(top_p);
  if (!use_top_k && !use_top_p) return race_over_row(row, vocab, 0, draw, sh);

  unsigned long long floor = 0;  // the top-k set: keys >= floor
  if (use_top_k) {
    if (top_k == 1) {
      floor = max_key;
    } else {
      select::SelectQuery query;
      query.universe_count = static_cast<uint32_t>(vocab);
      query.count = static_cast<unsigned long long>(top_k);
      floor = select::radix_select(row, vocab, query, sh);
    }
  }
  unsigned long long threshold = floor;
  if (use_top_p && floor != max_key) {
    select::SelectQuery query;
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

}  // namespace nanovllm::cuda::draw
