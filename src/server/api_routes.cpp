#include "server/api_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>

#include "core/check.h"
#include "core/logging.h"
#include "engine/llm_engine.h"
#include "llm/json_fields.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm {
namespace {

using Json = nlohmann::ordered_json;

HttpReply json_reply(const Json& body, int status = 200) {
  return {status, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace)};
}

// "cmpl-1f-3a": unique within the process (start time and a counter).
std::string request_id(const char* prefix) {
  static const int64_t start = std::chrono::system_clock::now().time_since_epoch().count();
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}-{:x}-{:x}", prefix, start, counter.fetch_add(1));
}

const Tokenizer& require_tokenizer(const LLM& llm) {
  if (llm.tokenizer() == nullptr) {
    throw ApiError::bad_request("the model directory has no tokenizer.json");
  }
  return *llm.tokenizer();
}

}  // namespace

bool constant_time_equal(const std::string& given, const std::string& expected) {
  if (expected.empty()) return false;
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    difference |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  }
  return difference == 0;
}

ApiRoutes::ApiRoutes(const LLM& llm, EngineService& service, ServerMetrics& metrics,
                     ApiOptions options)
    : llm_(llm),
      service_(service),
      metrics_(metrics),
      options_(std::move(options)),
      max_model_len_(llm.engine().max_model_len()),
      vocab_size_(llm.engine().limits().vocab_size),
      created_(static_cast<int64_t>(std::time(nullptr))) {
  if (llm.tokenizer() != nullptr && llm.tokenizer()->chat_template()) {
    chat_.emplace(*llm.tokenizer());
  }
}

HttpReply ApiRoutes::error_reply(int status, const std::string& message, const std::string& param) {
  return json_reply(ApiError(status, message, param).body(), status);
}

RouteResult ApiRoutes::handle(const HttpCall& call, const std::function<void()>& notify) {
  try {
    return route(call, notify);
  } catch (const ApiError& error) {
    return {json_reply(error.body(), error.status()), nullptr};
  } catch (const std::exception& error) {
    NVLLM_LOG_ERROR("{} {} failed: {}", call.method, call.path, error.what());
    return {error_reply(500, fmt::format("internal error: {}", error.what())), nullptr};
  }
}

RouteResult ApiRoutes::route(const HttpCall& call, const std::function<void()>& notify) {
  struct Endpoint {
    const char* method;
    const char* path;
  };
  static const Endpoint kEndpoints[] = {{"GET", "/health"},
                                        {"GET", "/metrics"},
                                        {"GET", "/v1/models"},
                                        {"POST", "/v1/completions"},
                                        {"POST", "/v1/chat/completions"},
                                        {"POST", "/tokenize"},
                                        {"POST", "/detokenize"}};
  bool known_path = false;
  for (const Endpoint& endpoint : kEndpoints) {
    if (call.path != endpoint.path) continue;
    known_path = true;
    if (call.method == endpoint.method) break;
    throw ApiError(405,
                   fmt::format("{} takes {}, not {}", call.path, endpoint.method, call.method));
  }
  if (!known_path) throw ApiError(404, fmt::format("no endpoint {}", call.path));
  if (call.path.starts_with("/v1/")) check_api_key(call);

  if (call.path == "/health") return {{200, "text/plain", ""}, nullptr};
  if (call.path == "/metrics") {
    return {{200, "text/plain; version=0.0.4; charset=utf-8", metrics_.render()}, nullptr};
  }
  if (call.path == "/v1/models") return {models(), nullptr};
  if (call.path == "/tokenize") return {tokenize(call), nullptr};
  if (call.path == "/detokenize") return {detokenize(call), nullptr};
  return generate(call, call.path == "/v1/completions" ? OpenAiApi::kCompletions : OpenAiApi::kChat,
                  notify);
}

void ApiRoutes::check_api_key(const HttpCall& call) const {
  if (options_.api_key.empty()) return;
  constexpr std::string_view kBearer = "Bearer ";
  const std::string& header = call.authorization;
  const std::string given = header.starts_with(kBearer) ? header.substr(kBearer.size()) : "";
  if (!constant_time_equal(given, options_.api_key)) {
    throw ApiError(401, header.empty() ? "missing API key: send 'Authorization: Bearer <key>'"
                                       : "invalid API key");
  }
}

void ApiRoutes::check_model(const std::optional<std::string>& model) const {
  if (model && *model != options_.served_model_name) {
    throw ApiError(404,
                   fmt::format("the model '{}' does not exist; this server serves '{}'", *model,
                               options_.served_model_name),
                   "model");
  }
}

RouteResult ApiRoutes::generate(const HttpCall& call, OpenAiApi api,
                                const std::function<void()>& notify) {
  const Json body = parse_json_body(call.body);
  GenerationRequest request =
      api == OpenAiApi::kChat ? parse_chat_request(body) : parse_completions_request(body);
  check_model(request.model);
  const char* prompt_param = api == OpenAiApi::kChat ? "messages" : "prompt";
  const size_t max_prompts =
      std::min(options_.max_prompts_per_request, service_.max_pending_requests());
  if (request.prompts.size() > max_prompts) {
    throw ApiError::bad_request(
        fmt::format("the request has {} prompts; one request takes at most {} "
                    "(--max-prompts-per-request {}, --max-pending-requests {})",
                    request.prompts.size(), max_prompts, options_.max_prompts_per_request,
                    service_.max_pending_requests()),
        prompt_param);
  }

  std::vector<EngineJob> jobs;
  for (const Prompt& prompt : request.prompts) {
    EngineJob job;
    try {
      job.prompt_token_ids = llm_.prompt_token_ids(prompt);
    } catch (const Error& error) {
      throw ApiError::bad_request(error.what(), prompt_param);
    }
    for (int id : job.prompt_token_ids) {
      if (id < 0 || id >= vocab_size_) {
        throw ApiError::bad_request(
            fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab_size_),
            prompt_param);
      }
    }
    const int64_t length = static_cast<int64_t>(job.prompt_token_ids.size());
    if (length == 0) throw ApiError::bad_request("the prompt encodes to no tokens", prompt_param);
    // At least one token must fit after the prompt.
    if (length >= max_model_len_) {
      throw ApiError::bad_request(
          fmt::format("this model's maximum context length is {} tokens, and the prompt has {}",
                      max_model_len_, length),
          prompt_param);
    }
    job.params = request.params;
    if (!request.max_tokens_given && api == OpenAiApi::kChat) {
      job.params.max_tokens = static_cast<int>(max_model_len_ - length);
    }
    if (request.max_tokens_given && length + job.params.max_tokens > max_model_len_) {
      throw ApiError::bad_request(
          fmt::format("this model's maximum context length is {} tokens; the prompt has {} and "
                      "max_tokens asks for {} more",
                      max_model_len_, length, job.params.max_tokens),
          "max_tokens");
    }
    jobs.push_back(std::move(job));
  }

  const size_t num_choices = jobs.size();
  auto stream = std::make_shared<GenerationStream>(num_choices);
  stream->set_notifier(notify);
  switch (service_.submit(std::move(jobs), stream)) {
    case EngineService::Admission::kAccepted:
      break;
    case EngineService::Admission::kQueueFull:
      throw ApiError(503,
                     "the server is overloaded: too many requests are waiting "
                     "(--max-pending-requests); retry later");
    case EngineService::Admission::kShuttingDown:
      throw ApiError(503, "the server is shutting down");
  }
  auto generation = std::make_unique<GenerationCall>(GenerationCall{
      std::move(stream),
      OpenAiResponse(api, request_id(api == OpenAiApi::kChat ? "chatcmpl" : "cmpl"),
                     options_.served_model_name, static_cast<int64_t>(std::time(nullptr)),
                     num_choices, request.include_usage, llm_.tokenizer()),
      request.stream});
  return {{}, std::move(generation)};
}

HttpReply ApiRoutes::models() const {
  Json model = {
      {"id", options_.served_model_name}, {"object", "model"},           {"created", created_},
      {"owned_by", "nanovllm"},           {"root", options_.model_path}, {"parent", nullptr},
      {"max_model_len", max_model_len_}};
  return json_reply({{"object", "list"}, {"data", Json::array({std::move(model)})}});
}

HttpReply ApiRoutes::tokenize(const HttpCall& call) const {
  const Json body = parse_json_body(call.body);
  if (body.contains("model") && !body["model"].is_null()) {
    check_model(field_as<std::string>(body, "model", "a string"));
  }
  const Tokenizer& tokenizer = require_tokenizer(llm_);
  const auto flag = [&body](const char* name, bool fallback) {
    if (!body.contains(name) || body[name].is_null()) return fallback;
    if (!body[name].is_boolean()) {
      throw ApiError::bad_request(fmt::format("'{}' must be true or false", name), name);
    }
    return body[name].get<bool>();
  };
  std::vector<int> ids;
  try {
    if (body.contains("prompt") == body.contains("messages")) {
      throw ApiError::bad_request("give exactly one of 'prompt' or 'messages'");
    }
    if (body.contains("prompt")) {
      const std::string text = field_as<std::string>(body, "prompt", "a string");
      ids = tokenizer.encode(text, flag("add_special_tokens", true));
    } else {
      if (!chat_) throw ApiError::bad_request("the tokenizer has no chat template", "messages");
      const Json kwargs = body.value("chat_template_kwargs", Json::object());
      if (!kwargs.is_object()) {
        throw ApiError::bad_request("'chat_template_kwargs' must be an object",
                                    "chat_template_kwargs");
      }
      ids = tokenizer.encode(
          chat_->render(body["messages"], flag("add_generation_prompt", true), kwargs));
    }
  } catch (const Error& error) {
    throw ApiError::bad_request(error.what(), body.contains("prompt") ? "prompt" : "messages");
  }
  return json_reply({{"count", ids.size()}, {"max_model_len", max_model_len_}, {"tokens", ids}});
}

HttpReply ApiRoutes::detokenize(const HttpCall& call) const {
  const Json body = parse_json_body(call.body);
  if (body.contains("model") && !body["model"].is_null()) {
    check_model(field_as<std::string>(body, "model", "a string"));
  }
  const Tokenizer& tokenizer = require_tokenizer(llm_);
  if (!body.contains("tokens")) throw ApiError::bad_request("'tokens' is required", "tokens");
  std::vector<int> ids;
  try {
    ids = int_list(body["tokens"], "tokens");
  } catch (const Error& error) {
    throw ApiError::bad_request(error.what(), "tokens");
  }
  for (int id : ids) {
    if (id < 0) {
      throw ApiError::bad_request(fmt::format("'tokens' must be token ids >= 0, found {}", id),
                                  "tokens");
    }
  }
  return json_reply({{"prompt", tokenizer.decode(ids)}});
}

}  // namespace nanovllm
