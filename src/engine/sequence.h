// One request as the scheduler sees it: its tokens, its place in the KV cache, its state.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"
#include "nanovllm/token_text_decoder.h"

namespace nanovllm {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  Sequence(int64_t id, std::vector<int> prompt_token_ids, SamplingParams params, uint64_t seed);

  int64_t id;
  SequenceStatus status = SequenceStatus::kWaiting;
  std::vector<int> token_ids;  // prompt followed by generated tokens
  int num_prompt_tokens;
  // Leading tokens whose K/V is in the cache: prefix-cache hits plus everything computed so
  // far. Tokens [num_cached_tokens, num_tokens()) still have to be run through the model.
  int num_cached_tokens = 0;
  // Leading blocks of block_table whose hash is in the prefix cache.
  int num_published_blocks = 0;
  std::vector<int> block_table;  // KV cache block ids, in token order
  SamplingParams params;
  // The request's seed (its own, or one drawn from the engine's generator): with the index of
  // the token being sampled it determines the draw (kernels/sampling_math.h).
  uint64_t seed;

  // Output state.
  std::unique_ptr<TokenTextDecoder> decoder;  // null when the engine has no text decoder
  std::string text;
  std::vector<PositionLogprobs> logprobs;
  std::string finish_reason;
  std::string error;  // why the request failed; its output is then this error alone

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_completion_tokens() const { return num_tokens() - num_prompt_tokens; }
  int last_token() const { return token_ids.back(); }
  // Blocks needed to hold the K/V of every token.
  int num_blocks(int block_size) const { return (num_tokens() + block_size - 1) / block_size; }
  // Token ids of block i (the last block may be partial).
  std::span<const int> block_tokens(int i, int block_size) const;
  std::span<const int> prompt_token_ids() const;
  std::span<const int> completion_token_ids() const;
};

}  // namespace nanovllm
