// The JSON-lines contract of `nanovllm generate`: one request object per line in, one output
// object per request out.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "nanovllm/llm.h"
#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm {

// Parses one input line: exactly one of "prompt" (string), "prompt_token_ids" (list of ints)
// or "messages" (list, with optional "chat_template_kwargs"), plus optional per-request
// "max_tokens", "temperature", "top_k", "top_p", "ignore_eos", "seed", "stop" (string or list),
// "stop_token_ids", "logprobs" over `defaults`. Throws Error naming the offending field.
Request parse_request_line(const std::string& line, const SamplingParams& defaults);

// {"index", "prompt_token_ids", "token_ids", "text", "finish_reason"} (+ "logprobs" when asked),
// or {"index", "error"} for a request that could not run.
nlohmann::ordered_json output_to_json(size_t index, const RequestOutput& output);

}  // namespace nanovllm
