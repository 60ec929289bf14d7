// The bodies of POST /v1/completions and /v1/chat/completions (OpenAI's fields and vLLM's
// extensions) checked and turned into prompts and sampling parameters.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "nanovllm/llm.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm {

enum class OpenAiApi { kCompletions, kChat };

struct GenerationRequest {
  OpenAiApi api = OpenAiApi::kCompletions;
  std::optional<std::string> model;  // as the client named it
  std::vector<Prompt> prompts;       // one per choice: completions take a list, chat one
  SamplingParams params;
  // Without max_tokens a chat completion may fill the rest of the context, as in vLLM.
  bool max_tokens_given = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Both throw ApiError (400) naming the field at fault. Fields that neither OpenAI nor vLLM
// define are ignored, as vLLM does; known ones this engine cannot honour (n > 1, penalties,
// tools, ...) are refused rather than ignored.
GenerationRequest parse_completions_request(const nlohmann::ordered_json& body);
GenerationRequest parse_chat_request(const nlohmann::ordered_json& body);

// Parses a request body; throws ApiError (400) for malformed JSON or a non-object.
nlohmann::ordered_json parse_json_body(const std::string& body);

}  // namespace nanovllm
