#include "llm/request_json.h"

#include <set>

#include "core/check.h"
#include "core/json_input.h"
#include "llm/json_fields.h"

namespace nanovllm {
namespace {

const std::set<std::string>& known_fields() {
  static const std::set<std::string> fields = {"prompt",     "prompt_token_ids",
                                               "messages",   "chat_template_kwargs",
                                               "max_tokens", "temperature",
                                               "top_k",      "top_p",
                                               "ignore_eos", "seed",
                                               "stop",       "stop_token_ids",
                                               "logprobs"};
  return fields;
}

Prompt parse_prompt(const nlohmann::ordered_json& request) {
  const int forms = static_cast<int>(request.contains("prompt")) +
                    static_cast<int>(request.contains("prompt_token_ids")) +
                    static_cast<int>(request.contains("messages"));
  if (forms != 1) {
    throw Error("a request needs exactly one of 'prompt', 'prompt_token_ids' or 'messages'");
  }
  if (request.contains("chat_template_kwargs") && !request.contains("messages")) {
    throw Error("'chat_template_kwargs' only applies to 'messages'");
  }
  if (request.contains("prompt")) {
    std::string text = field_as<std::string>(request, "prompt", "a string");
    if (text.empty()) throw Error("'prompt' is empty");
    return Prompt::from_text(std::move(text));
  }
  if (request.contains("prompt_token_ids")) {
    std::vector<int> ids = int_list(request["prompt_token_ids"], "prompt_token_ids");
    if (ids.empty()) throw Error("'prompt_token_ids' is empty");
    return Prompt::from_token_ids(std::move(ids));
  }
  // The chat template checks the messages when the prompt is rendered.
  nlohmann::ordered_json kwargs =
      request.value("chat_template_kwargs", nlohmann::ordered_json::object());
  if (!kwargs.is_object()) throw Error("'chat_template_kwargs' must be an object");
  return Prompt::from_messages(request["messages"], std::move(kwargs));
}

}  // namespace

Request parse_request_line(const std::string& line, const SamplingParams& defaults) {
  const auto request = parse_json<nlohmann::ordered_json>(line);
  if (!request.is_object()) throw Error("a request must be a JSON object");
  for (const auto& [key, value] : request.items()) {
    if (!known_fields().contains(key)) throw Error(fmt::format("unknown field '{}'", key));
  }

  Request parsed{parse_prompt(request), defaults, {}};
  SamplingParams& params = parsed.params;
  if (request.contains("max_tokens")) {
    params.max_tokens = field_as<int>(request, "max_tokens", "a 32-bit integer");
  }
  if (request.contains("temperature")) {
    params.temperature = field_as<float>(request, "temperature", "a number");
  }
  if (request.contains("top_k")) params.top_k = field_as<int>(request, "top_k", "a 32-bit integer");
  if (request.contains("top_p")) params.top_p = field_as<float>(request, "top_p", "a number");
  if (request.contains("ignore_eos")) {
    params.ignore_eos = field_as<bool>(request, "ignore_eos", "true or false");
  }
  if (request.contains("seed")) {
    if (!request["seed"].is_number_unsigned()) throw Error("'seed' must be a non-negative integer");
    params.seed = request["seed"].get<uint64_t>();
  }
  if (request.contains("stop")) params.stop = string_list(request["stop"], "stop");
  if (request.contains("stop_token_ids")) {
    params.stop_token_ids = int_list(request["stop_token_ids"], "stop_token_ids");
  }
  if (request.contains("logprobs")) {
    params.logprobs = field_as<int>(request, "logprobs", "a 32-bit integer");
  }
  params.validate();
  return parsed;
}

nlohmann::ordered_json output_to_json(size_t index, const RequestOutput& output) {
  if (!output.ok()) return {{"index", index}, {"error", output.error}};
  nlohmann::ordered_json row = {{"index", index},
                                {"prompt_token_ids", output.prompt_token_ids},
                                {"token_ids", output.token_ids},
                                {"text", output.text},
                                {"finish_reason", output.finish_reason}};
  if (output.logprobs) {
    nlohmann::ordered_json positions = nlohmann::ordered_json::array();
    for (const PositionLogprobs& position : *output.logprobs) {
      nlohmann::ordered_json top = nlohmann::ordered_json::array();
      for (const TokenLogprob& entry : position.top) {
        top.push_back({{"token_id", entry.token_id}, {"logprob", entry.logprob}});
      }
      positions.push_back({{"token_id", position.token_id},
                           {"logprob", position.logprob},
                           {"rank", position.rank},
                           {"top", std::move(top)}});
    }
    row["logprobs"] = std::move(positions);
  }
  return row;
}

}  // namespace nanovllm
