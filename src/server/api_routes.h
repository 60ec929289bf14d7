// The endpoints, apart from HTTP itself: a parsed call in, a reply (or a generation the
// connection then drives) out. Runs on the I/O threads; the engine is reached only through
// the EngineService.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "llm/chat_prompt.h"
#include "nanovllm/llm.h"
#include "server/engine_service.h"
#include "server/generation_stream.h"
#include "server/openai_response.h"
#include "server/server_metrics.h"

namespace nanovllm {

struct HttpCall {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query string
  std::string body;
  std::string authorization;  // the Authorization header, "" when absent
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// A generation in flight: its updates arrive on `stream` (whose notifier the caller supplied).
struct GenerationCall {
  std::shared_ptr<GenerationStream> stream;
  OpenAiResponse response;
  bool streaming = false;
};

struct RouteResult {
  HttpReply reply;                             // when generation is null
  std::unique_ptr<GenerationCall> generation;  // a submitted generation
};

struct ApiOptions {
  std::string served_model_name;
  std::string model_path;
  std::string api_key;  // "" = no key needed
  // More prompts in one completions request are a 400 (as are more than can ever wait).
  size_t max_prompts_per_request = 256;
};

class ApiRoutes {
 public:
  ApiRoutes(const LLM& llm, EngineService& service, ServerMetrics& metrics, ApiOptions options);

  // `notify` becomes the notifier of a generation's stream (see GenerationStream). Never throws:
  // every problem is an OpenAI-style error reply.
  RouteResult handle(const HttpCall& call, const std::function<void()>& notify);

  // The body for an error status (413 for an oversized body, ...).
  static HttpReply error_reply(int status, const std::string& message,
                               const std::string& param = "");

 private:
  RouteResult route(const HttpCall& call, const std::function<void()>& notify);
  void check_api_key(const HttpCall& call) const;
  void check_model(const std::optional<std::string>& model) const;
  RouteResult generate(const HttpCall& call, OpenAiApi api, const std::function<void()>& notify);
  HttpReply models() const;
  HttpReply tokenize(const HttpCall& call) const;
  HttpReply detokenize(const HttpCall& call) const;

  const LLM& llm_;
  EngineService& service_;
  ServerMetrics& metrics_;
  ApiOptions options_;
  int max_model_len_;
  int vocab_size_;
  std::optional<ChatPrompt> chat_;  // for /tokenize, when the tokenizer has a chat template
  int64_t created_;                 // when the server started, for /v1/models
};

// Whether `given` equals `expected`, in time that depends only on their lengths.
bool constant_time_equal(const std::string& given, const std::string& expected);

}  // namespace nanovllm
