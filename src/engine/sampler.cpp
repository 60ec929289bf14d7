#include "engine/sampler.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/cpu_ops.h"

namespace nanovllm {

SampleResult sample_token(std::span<const float> logits, const SamplingParams& params,
                          uint64_t seed, int position) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  cpu::check_sampling_vocabulary(vocab);
  thread_local std::vector<uint64_t> scratch;
  const cpu::RowSamplingParams row{params.temperature, params.top_k, params.top_p, seed, position};
  SampleResult result;
  result.token_id = cpu::sample_row(logits.data(), vocab, row, scratch);
  if (result.token_id < 0) throw Error("sampler: every logit is NaN");
  if (params.logprobs) result.logprobs = token_logprobs(logits, result.token_id, *params.logprobs);
  return result;
}

PositionLogprobs token_logprobs(std::span<const float> logits, int token_id, int num_top) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  cpu::check_sampling_vocabulary(vocab);
  const int count = static_cast<int>(std::clamp<int64_t>(num_top, 0, vocab));
  cpu::check_logprobs_count(count, vocab);
  thread_local std::vector<uint64_t> scratch;
  std::vector<int32_t> top_ids(count);
  std::vector<float> top_logprobs(count);
  const cpu::RowLogprobs row = cpu::logprobs_row(logits.data(), vocab, token_id, count,
                                                 top_ids.data(), top_logprobs.data(), scratch);
  PositionLogprobs result;
  result.token_id = token_id;
  result.logprob = row.logprob;
  result.rank = row.rank;
  result.top.reserve(count);
  for (int i = 0; i < count; ++i) result.top.push_back({top_ids[i], top_logprobs[i]});
  return result;
}

}  // namespace nanovllm
