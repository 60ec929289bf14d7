// Logprobs on the GPU: one CTA per row. One pass gives the log-normalizer (an online max and
// sum of exponentials per thread, combined in double) and the sampled token's rank; the top
// entries come from a radix select of the num_top largest rank keys.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/runtime/launch.cuh"
#include "kernels/cuda/sampling/sampling.h"
#include "kernels/cuda/sampling/sampling_select.cuh"
#include "kernels/sampling_math.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm::cuda {
namespace {

using select::SelectQuery;
using select::SelectShared;

constexpr int kMaxTop = SamplingParams::kMaxLogprobs;

struct TopShared {
  unsigned long long keys[kMaxTop];
  uint32_t count;
};

__device__ __forceinline__ void keep_top_key(unsigned long long key, TopShared& top) {
  const uint32_t slot = atomicAdd(&top.count, 1u);
  if (slot < kMaxTop) top.keys[slot] = key;
}

// Writes the num_top keys >= threshold, largest first, as ids and logprobs (thread 0).
__device__ void write_top(const float* row, TopShared& top, int num_top, double log_normalizer,
                          int32_t* top_ids, float* top_logprobs) {
  const int found = static_cast<int>(min(top.count, static_cast<uint32_t>(kMaxTop)));
  for (int i = 1; i < found; ++i) {  // insertion sort, descending
    const unsigned long long key = top.keys[i];
    int j = i;
    for (; j > 0 && top.keys[j - 1] < key; --j) top.keys[j] = top.keys[j - 1];
    top.keys[j] = key;
  }
  for (int i = 0; i < num_top; ++i) {
    if (i < found) {
      const int32_t id = sampling::token_of_key(top.keys[i]);
      top_ids[i] = id;
      top_logprobs[i] = static_cast<float>(static_cast<double>(row[id]) - log_normalizer);
    } else {  // unreachable: the select leaves exactly num_top keys above its threshold
      top_ids[i] = -1;
      top_logprobs[i] = __int_as_float(0x7fc00000);
    }
  }
}

__global__ void __launch_bounds__(select::kSelectThreads, 2) logprobs_kernel(LogprobsArgs args) {
  start_after_prior_kernels();
  __shared__ SelectShared sh;
  __shared__ TopShared top;
  const int64_t r = blockIdx.x;
  const int vocab = static_cast<int>(args.vocab);
  const float* row = args.logits + r * args.vocab;
  const int32_t token = args.token_ids[r];
  const bool valid = token >= 0 && token < vocab;
  const float token_logit = valid ? __ldg(row + token) : __int_as_float(0x7fc00000);

  // Per thread: running max and the sum of exp(l - max) over the logits above -inf (NaN skipped).
  float local_max = -__builtin_huge_valf();
  double local_sum = 0.0;
  uint32_t larger = 0;
  select::for_each_group(row, vocab, [&](int, const float(&logits)[4], int n) {
    for (int j = 0; j < n; ++j) {
      const float logit = logits[j];
      larger += logit > token_logit ? 1u : 0u;
      if (!(logit > -__builtin_huge_valf())) continue;
      if (logit > local_max) {
        local_sum = local_sum * static_cast<double>(expf(local_max - logit)) + 1.0;
        local_max = logit;
      } else {
        local_sum += static_cast<double>(expf(logit - local_max));
      }
    }
  });
  const float max_logit = select::block_max_f32(local_max, sh);
  const bool any_finite = max_logit > -__builtin_huge_valf();
  const double scaled =
      local_max > -__builtin_huge_valf()
          ? local_sum * exp(static_cast<double>(local_max) - static_cast<double>(max_logit))
          : 0.0;
  const double sum = select::block_sum_f64(scaled, sh);
  const unsigned long long rank_count = select::block_sum_u64(larger, sh);
  const double log_normalizer =
      any_finite ? static_cast<double>(max_logit) + log(sum) : static_cast<double>(max_logit);
  if (threadIdx.x == 0) {
    args.logprob[r] = valid ? static_cast<float>(static_cast<double>(token_logit) - log_normalizer)
                            : __int_as_float(0x7fc00000);
    args.rank[r] = valid ? static_cast<int32_t>(1 + rank_count) : 0;
  }
  if (args.num_top == 0) return;

  if (threadIdx.x == 0) {
    sh.compacted = 0;
    top.count = 0;
  }  // published by the barriers at the start of radix_select
  SelectQuery query;
  query.universe_count = static_cast<uint32_t>(vocab);
  query.count = static_cast<unsigned long long>(args.num_top);
  const unsigned long long threshold = select::radix_select(row, vocab, query, sh);
  if (sh.compacted) {
    const int num =
        static_cast<int>(min(sh.num_candidates, static_cast<uint32_t>(select::kCandidateCapacity)));
    for (int i = threadIdx.x; i < num; i += select::kSelectThreads) {
      if (sh.candidates[i] >= threshold) keep_top_key(sh.candidates[i], top);
    }
  } else {
    select::for_each_group(row, vocab, [&](int group, const float(&logits)[4], int n) {
      for (int j = 0; j < n; ++j) {
        const unsigned long long key = sampling::rank_key(logits[j], 4 * group + j);
        if (key >= threshold) keep_top_key(key, top);
      }
    });
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    write_top(row, top, args.num_top, log_normalizer, args.top_ids + r * args.num_top,
              args.top_logprobs + r * args.num_top);
  }
}

}  // namespace

void compute_logprobs(const LogprobsArgs& args, cudaStream_t stream) {
  NVLLM_CHECK_MSG(args.vocab > 0 && args.vocab <= sampling::kMaxVocabulary,
                  "logprobs over a vocabulary of {} tokens: expected 1 to {}", args.vocab,
                  sampling::kMaxVocabulary);
  NVLLM_CHECK_MSG(args.num_top >= 0 && args.num_top <= kMaxTop && args.num_top <= args.vocab,
                  "{} top logprobs asked of a vocabulary of {}: expected 0 to {}", args.num_top,
                  args.vocab, std::min<int64_t>(kMaxTop, args.vocab));
  NVLLM_CHECK_MSG(args.rows >= 0 && args.rows <= INT32_MAX, "logprobs of {} rows", args.rows);
  if (args.rows == 0) return;
  launch_kernel(logprobs_kernel, static_cast<unsigned>(args.rows), select::kSelectThreads, 0,
                stream, args);
}

}  // namespace nanovllm::cuda
