// Token sampling on host fp32 logits.
//
// Greedy (temperature 0): argmax, the lowest token id on ties. Otherwise the logits are divided
// by the temperature, restricted to the top_k most likely tokens, then to the smallest set
// whose renormalized probability reaches top_p (at least one token), and one token is drawn by
// inverting the cumulative distribution with a single uniform number from the sequence's own
// stream, so a sequence's tokens do not depend on what else is in the batch. Logprobs come
// from the raw logits (log_softmax, no temperature or truncation), as vLLM reports them.
#pragma once

#include <random>
#include <span>
#include <vector>

#include "engine/model_executor.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm {

// A uniform double in [0, 1) from 53 bits of the stream (same on every standard library).
double uniform_01(std::mt19937_64& rng);

class Sampler {
 public:
  // logits: fp32 [vocab] of one sequence.
  SampleResult sample(std::span<const float> logits, const SamplingParams& params,
                      std::mt19937_64& rng);

  // logits: fp32 [rows.size(), vocab], row i sampled with rows[i]'s params and stream.
  struct Row {
    const SamplingParams* params = nullptr;
    std::mt19937_64* rng = nullptr;
  };
  void sample_rows(const float* logits, int vocab, std::span<const Row> rows,
                   std::vector<SampleResult>& out);

 private:
  int sample_random(std::span<const float> logits, const SamplingParams& params,
                    std::mt19937_64& rng);
  int sample_full_vocabulary(std::span<const float> logits, const SamplingParams& params,
                             std::mt19937_64& rng);
  PositionLogprobs compute_logprobs(std::span<const float> logits, int token_id, int num_top);

  // Scratch reused across calls.
  std::vector<int> candidates_;
  std::vector<double> weights_;
};

// argmax with the lowest index on ties; throws Error when no logit is a number.
int argmax_lowest_index(std::span<const float> logits);

}  // namespace nanovllm
