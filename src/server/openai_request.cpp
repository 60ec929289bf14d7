#include "server/openai_request.h"

#include <fmt/format.h>

#include <string_view>

#include "core/check.h"
#include "core/json_input.h"
#include "llm/json_fields.h"
#include "server/api_error.h"

namespace nanovllm {
namespace {

using Json = nlohmann::ordered_json;

// Whether `name` is present and not null (clients send null for "not set").
bool has(const Json& body, const char* name) {
  return body.contains(name) && !body.at(name).is_null();
}

// Runs `parse`, turning the Error it throws into a 400 naming `param`.
template <typename Parse>
auto as_field(const char* param, Parse&& parse) {
  try {
    return parse();
  } catch (const Error& error) {
    throw ApiError::bad_request(error.what(), param);
  }
}

template <typename T>
std::optional<T> optional_field(const Json& body, const char* name, const char* expected) {
  if (!has(body, name)) return std::nullopt;
  return as_field(name, [&] { return field_as<T>(body, name, expected); });
}

// A field this engine does not implement: accepted only at its neutral value.
void refuse_unless(const Json& body, const char* name, bool neutral, const char* what) {
  if (has(body, name) && !neutral) {
    throw ApiError::bad_request(fmt::format("'{}' is not supported: {}", name, what), name);
  }
}

void refuse_unsupported(const Json& body) {
  const auto number_is = [&body](const char* name, double value) {
    return body.at(name).is_number() && body.at(name).get<double>() == value;
  };
  const auto empty = [&body](const char* name) { return body.at(name).empty(); };
  refuse_unless(body, "n", has(body, "n") && number_is("n", 1), "only n = 1 is served");
  refuse_unless(body, "best_of", has(body, "best_of") && number_is("best_of", 1),
                "only best_of = 1 is served");
  refuse_unless(body, "use_beam_search",
                has(body, "use_beam_search") && body["use_beam_search"] == false,
                "there is no beam search");
  for (const char* penalty : {"presence_penalty", "frequency_penalty"}) {
    refuse_unless(body, penalty, has(body, penalty) && number_is(penalty, 0),
                  "penalties are not implemented");
  }
  refuse_unless(body, "repetition_penalty",
                has(body, "repetition_penalty") && number_is("repetition_penalty", 1),
                "penalties are not implemented");
  refuse_unless(body, "min_p", has(body, "min_p") && number_is("min_p", 0),
                "min_p sampling is not implemented");
  refuse_unless(body, "logit_bias", has(body, "logit_bias") && empty("logit_bias"),
                "logit biases are not implemented");
}

// Reads the sampling fields both APIs share into `params`.
void parse_sampling(const Json& body, SamplingParams& params) {
  if (auto value = optional_field<float>(body, "temperature", "a number")) {
    params.temperature = *value;
  }
  if (auto value = optional_field<float>(body, "top_p", "a number")) params.top_p = *value;
  if (auto value = optional_field<int>(body, "top_k", "a 32-bit integer")) params.top_k = *value;
  if (has(body, "seed")) {
    if (!body["seed"].is_number_unsigned()) {
      throw ApiError::bad_request(
          fmt::format("'seed' must be a non-negative integer, got {}", json_excerpt(body["seed"])),
          "seed");
    }
    params.seed = body["seed"].get<uint64_t>();
  }
  if (has(body, "stop")) {
    params.stop = as_field("stop", [&] { return string_list(body["stop"], "stop"); });
  }
  if (has(body, "stop_token_ids")) {
    params.stop_token_ids = as_field(
        "stop_token_ids", [&] { return int_list(body["stop_token_ids"], "stop_token_ids"); });
  }
  if (auto value = optional_field<bool>(body, "ignore_eos", "true or false")) {
    params.ignore_eos = *value;
  }
}

// SamplingParams::validate, its message naming the field ("invalid sampling params: top_p ...").
void validate_sampling(const SamplingParams& params) {
  try {
    params.validate();
  } catch (const Error& error) {
    std::string_view message = error.what();
    constexpr std::string_view kPrefix = "invalid sampling params: ";
    std::string param;
    if (message.starts_with(kPrefix)) {
      const std::string_view rest = message.substr(kPrefix.size());
      param = std::string(rest.substr(0, rest.find(' ')));
    }
    throw ApiError::bad_request(error.what(), param);
  }
}

void parse_common(const Json& body, GenerationRequest& request) {
  if (has(body, "model")) {
    request.model =
        as_field("model", [&] { return field_as<std::string>(body, "model", "a string"); });
  }
  refuse_unsupported(body);
  parse_sampling(body, request.params);
  if (auto value = optional_field<bool>(body, "stream", "true or false")) request.stream = *value;
  if (has(body, "stream_options")) {
    const Json& options = body["stream_options"];
    if (!options.is_object()) {
      throw ApiError::bad_request("'stream_options' must be an object", "stream_options");
    }
    if (!request.stream) {
      throw ApiError::bad_request("'stream_options' is only allowed when 'stream' is true",
                                  "stream_options");
    }
    if (auto value = optional_field<bool>(options, "include_usage", "true or false")) {
      request.include_usage = *value;
    }
  }
}

void set_max_tokens(const Json& body, const char* name, GenerationRequest& request) {
  if (auto value = optional_field<int>(body, name, "a 32-bit integer")) {
    if (*value < 1) {
      throw ApiError::bad_request(fmt::format("'{}' must be at least 1, got {}", name, *value),
                                  name);
    }
    request.params.max_tokens = *value;
    request.max_tokens_given = true;
  }
}

// "prompt": a string, a list of token ids, or a list of either.
std::vector<Prompt> parse_completion_prompts(const Json& body) {
  if (!has(body, "prompt")) throw ApiError::bad_request("'prompt' is required", "prompt");
  const Json& prompt = body["prompt"];
  const auto one = [](const Json& item) {
    if (item.is_string()) {
      if (item.get<std::string>().empty())
        throw ApiError::bad_request("'prompt' is empty", "prompt");
      return Prompt::from_text(item.get<std::string>());
    }
    std::vector<int> ids = as_field("prompt", [&] { return int_list(item, "prompt"); });
    if (ids.empty()) throw ApiError::bad_request("'prompt' is empty", "prompt");
    return Prompt::from_token_ids(std::move(ids));
  };
  if (prompt.is_string()) return {one(prompt)};
  if (!prompt.is_array() || prompt.empty()) {
    throw ApiError::bad_request(
        "'prompt' must be a string, a list of token ids, or a non-empty list of either", "prompt");
  }
  if (prompt.front().is_number()) return {one(prompt)};
  std::vector<Prompt> prompts;
  for (const Json& item : prompt) {
    if (!item.is_string() && !item.is_array()) {
      throw ApiError::bad_request(
          fmt::format("'prompt' list items must be strings or lists of token ids, found {}",
                      json_excerpt(item)),
          "prompt");
    }
    prompts.push_back(one(item));
  }
  return prompts;
}

// Content as a string: a string, or a list of text parts joined (other parts are refused).
Json message_content(const Json& content, size_t index) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) {
    throw ApiError::bad_request(
        fmt::format("messages[{}].content must be a string or a list of text parts", index),
        "messages");
  }
  std::string text;
  for (const Json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      throw ApiError::bad_request(
          fmt::format("messages[{}].content: only {{\"type\": \"text\", \"text\": ...}} parts "
                      "are supported, found {}",
                      index, json_excerpt(part)),
          "messages");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

Json parse_messages(const Json& body) {
  if (!has(body, "messages")) throw ApiError::bad_request("'messages' is required", "messages");
  const Json& messages = body["messages"];
  if (!messages.is_array() || messages.empty()) {
    throw ApiError::bad_request("'messages' must be a non-empty list", "messages");
  }
  Json checked = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& message = messages[i];
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      throw ApiError::bad_request(
          fmt::format("messages[{}] must be an object with a string 'role'", i), "messages");
    }
    static const std::vector<std::string> kRoles = {"system", "developer", "user", "assistant",
                                                    "tool"};
    const std::string role = message["role"].get<std::string>();
    if (std::find(kRoles.begin(), kRoles.end(), role) == kRoles.end()) {
      throw ApiError::bad_request(fmt::format("messages[{}].role '{}' is not one of system, "
                                              "developer, user, assistant, tool",
                                              i, role),
                                  "messages");
    }
    Json copy = message;
    copy["content"] = message_content(message.value("content", Json()), i);
    if (copy["content"].is_null() && role != "assistant") {
      throw ApiError::bad_request(fmt::format("messages[{}] has no content", i), "messages");
    }
    checked.push_back(std::move(copy));
  }
  return checked;
}

}  // namespace

Json parse_json_body(const std::string& body) {
  Json parsed;
  try {
    parsed = parse_json<Json>(body);
  } catch (const Error& error) {
    throw ApiError::bad_request(fmt::format("the body: {}", error.what()));
  }
  if (!parsed.is_object()) throw ApiError::bad_request("the body must be a JSON object");
  return parsed;
}

GenerationRequest parse_completions_request(const Json& body) {
  GenerationRequest request;
  request.api = OpenAiApi::kCompletions;
  request.params.max_tokens = 16;  // OpenAI's default for completions
  parse_common(body, request);
  refuse_unless(body, "echo", has(body, "echo") && body["echo"] == false,
                "the prompt is not echoed");
  refuse_unless(body, "suffix", false, "there is no insertion mode");
  set_max_tokens(body, "max_tokens", request);
  if (auto value = optional_field<int>(body, "logprobs", "an integer")) {
    request.params.logprobs = *value;
  }
  request.prompts = parse_completion_prompts(body);
  validate_sampling(request.params);
  return request;
}

GenerationRequest parse_chat_request(const Json& body) {
  GenerationRequest request;
  request.api = OpenAiApi::kChat;
  parse_common(body, request);
  refuse_unless(body, "tools", has(body, "tools") && body["tools"].empty(),
                "tool calling is not implemented");
  refuse_unless(body, "response_format",
                has(body, "response_format") && body["response_format"].is_object() &&
                    body["response_format"].value("type", "") == "text",
                "only {\"type\": \"text\"} is served");
  set_max_tokens(body, "max_tokens", request);
  set_max_tokens(body, "max_completion_tokens", request);  // the newer name wins
  const bool logprobs = optional_field<bool>(body, "logprobs", "true or false").value_or(false);
  const std::optional<int> top = optional_field<int>(body, "top_logprobs", "an integer");
  if (top && !logprobs) {
    throw ApiError::bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  }
  if (logprobs) request.params.logprobs = top.value_or(0);
  Json kwargs = Json::object();
  if (has(body, "chat_template_kwargs")) {
    kwargs = body["chat_template_kwargs"];
    if (!kwargs.is_object()) {
      throw ApiError::bad_request("'chat_template_kwargs' must be an object",
                                  "chat_template_kwargs");
    }
  }
  request.prompts.push_back(Prompt::from_messages(parse_messages(body), std::move(kwargs)));
  validate_sampling(request.params);
  return request;
}

}  // namespace nanovllm
