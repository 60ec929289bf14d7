// Per-request sampling settings, named as in nano-vllm and vLLM.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm {

struct SamplingParams {
  // Largest number of top logprobs a request may ask for (vLLM's default limit).
  static constexpr int kMaxLogprobs = 20;
  // Temperatures below this sample greedily, as in vLLM (dividing by ~0 overflows).
  static constexpr float kGreedyTemperature = 1e-5f;

  float temperature = 1.0f;  // 0 = greedy (argmax, lowest token id on ties)
  int max_tokens = 64;       // generated tokens at most
  bool ignore_eos = false;   // keep generating past the model's EOS tokens
  int top_k = 0;             // keep the k most likely tokens; 0 or -1 = all
  float top_p = 1.0f;        // nucleus: smallest set whose probability reaches top_p, in (0, 1]
  // Seeds this request's own random stream: the same seed gives the same tokens whatever else
  // is in the batch. Without it the stream is seeded from the engine's generator.
  std::optional<uint64_t> seed;
  // Report, per generated token, the sampled token's logprob and the `logprobs` most likely
  // tokens (0 = only the sampled token) of the model's raw distribution (log_softmax of the
  // unmodified logits). nullopt = no logprobs.
  std::optional<int> logprobs;
  std::vector<int> stop_token_ids;  // generating any of these finishes with "stop"
  // Finishing strings: the output text is cut before the first occurrence and the request
  // finishes with "stop". Needs a text decoder in the engine.
  std::vector<std::string> stop;

  bool is_greedy() const { return temperature < kGreedyTemperature; }

  // Throws nanovllm::Error (core/check.h) naming the first invalid field.
  void validate() const;
};

}  // namespace nanovllm
