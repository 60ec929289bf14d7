// What the engine returns for one request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm {

struct TokenLogprob {
  int token_id = 0;
  float logprob = 0.0f;
};

// Logprobs at one generated position, from the model's raw distribution.
struct PositionLogprobs {
  int token_id = 0;               // the sampled token
  float logprob = 0.0f;           // its logprob
  int rank = 0;                   // 1 + number of tokens with a strictly larger logit
  std::vector<TokenLogprob> top;  // the most likely tokens, best first (ties: lower id first)
};

struct RequestOutput {
  int64_t request_id = -1;
  std::vector<int> prompt_token_ids;
  std::vector<int> token_ids;  // generated tokens, including a final EOS / stop token
  std::string text;            // generated text (empty without a text decoder)
  std::string finish_reason;   // "stop" | "length"; empty for a rejected request
  // One entry per generated token when the request asked for logprobs.
  std::optional<std::vector<PositionLogprobs>> logprobs;
  std::string error;  // why the request was rejected; empty when it ran

  bool ok() const { return error.empty(); }
};

}  // namespace nanovllm
