// One call's choice updates as OpenAI response bodies: the whole response at the end, or
// server-sent events as the tokens come (chat.completion.chunk / text_completion chunks, a
// usage chunk when asked, then "data: [DONE]").
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "server/generation_stream.h"
#include "server/openai_request.h"

namespace nanovllm {

class Tokenizer;

class OpenAiResponse {
 public:
  // `tokenizer` names logprob tokens (null: their ids as text).
  OpenAiResponse(OpenAiApi api, std::string id, std::string model, int64_t created,
                 size_t num_choices, bool include_usage, const Tokenizer* tokenizer);

  // Streaming: the events that open the stream (the assistant role, for chat).
  std::string start_events() const;
  // Streaming: the events for these updates. When a choice failed, an error event and
  // "[DONE]" end the stream; when every choice finished, the usage chunk (if asked) and
  // "[DONE]" do. done() is then true.
  std::string events(std::vector<std::pair<size_t, ChoiceUpdate>> updates);

  // Whole response: adds updates. Once finished(), response() is the body, unless error().
  void add(std::vector<std::pair<size_t, ChoiceUpdate>> updates);
  bool finished() const { return num_finished_ == choices_.size(); }
  bool done() const { return done_; }
  // The first choice that failed, or nullptr.
  const ChoiceUpdate* error() const;
  nlohmann::ordered_json response() const;

 private:
  struct Choice {
    std::string text;
    nlohmann::ordered_json logprobs;  // null, or accumulated in the API's shape
    size_t text_offset = 0;           // completions logprobs: where the next token starts
    ChoiceUpdate last;                // the finishing update (reason, counts, error)
    bool finished = false;
  };

  // The update's logprobs in the API's shape, advancing the choice's text offset.
  nlohmann::ordered_json logprobs_json(Choice& choice, const ChoiceUpdate& update);
  void append_logprobs(Choice& choice, const nlohmann::ordered_json& more);
  nlohmann::ordered_json chunk(size_t index, const ChoiceUpdate& update,
                               nlohmann::ordered_json logprobs) const;
  nlohmann::ordered_json envelope(const char* object) const;
  nlohmann::ordered_json usage() const;
  std::string token_text(int token_id) const;

  OpenAiApi api_;
  std::string id_;
  std::string model_;
  int64_t created_;
  bool include_usage_;
  const Tokenizer* tokenizer_;
  std::vector<Choice> choices_;
  size_t num_finished_ = 0;
  bool done_ = false;
};

// "data: <json>\n\n".
std::string sse_event(const nlohmann::ordered_json& data);

}  // namespace nanovllm
