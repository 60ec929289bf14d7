// Token sampling and logprobs on host fp32 logits, for executors that hold their logits on the
// host (the engine tests' fake model). It is the CPU backend's implementation of the rule in
// kernels/sampling_math.h, so a request draws the same tokens here as through Backend::sample:
// the token at index `position` of a sequence is a pure function of the logits, the sampling
// parameters, the request's seed and that position, whatever else is in the batch.
#pragma once

#include <cstdint>
#include <span>

#include "engine/model_executor.h"
#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm {

// The token drawn from logits fp32 [vocab] for index `position` of a sequence whose request has
// `seed`, with its logprobs when params.logprobs is set. Throws Error when every logit is NaN.
SampleResult sample_token(std::span<const float> logits, const SamplingParams& params,
                          uint64_t seed, int position);

// log_softmax of the raw logits at token_id, its rank (1 + number of strictly larger logits) and
// the min(num_top, vocab) most likely tokens, lowest id first on ties.
PositionLogprobs token_logprobs(std::span<const float> logits, int token_id, int num_top);

}  // namespace nanovllm
