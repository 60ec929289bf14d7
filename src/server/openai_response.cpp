#include "server/openai_response.h"

#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm {

using Json = nlohmann::ordered_json;

std::string sse_event(const Json& data) {
  return "data: " + data.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

namespace {

const std::string kDone = "data: [DONE]\n\n";

Json byte_list(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

OpenAiResponse::OpenAiResponse(OpenAiApi api, std::string id, std::string model, int64_t created,
                               size_t num_choices, bool include_usage, const Tokenizer* tokenizer)
    : api_(api),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      include_usage_(include_usage),
      tokenizer_(tokenizer),
      choices_(num_choices) {}

std::string OpenAiResponse::token_text(int token_id) const {
  if (tokenizer_ == nullptr) return "token_id:" + std::to_string(token_id);
  const int ids[] = {token_id};
  return tokenizer_->decode(ids);
}

Json OpenAiResponse::envelope(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

Json OpenAiResponse::usage() const {
  int64_t prompt = 0;
  int64_t completion = 0;
  for (const Choice& choice : choices_) {
    prompt += choice.last.num_prompt_tokens;
    completion += choice.last.num_completion_tokens;
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

Json OpenAiResponse::logprobs_json(Choice& choice, const ChoiceUpdate& update) {
  if (update.logprobs.empty()) return nullptr;
  if (api_ == OpenAiApi::kChat) {
    Json content = Json::array();
    for (const PositionLogprobs& position : update.logprobs) {
      Json top = Json::array();
      for (const TokenLogprob& entry : position.top) {
        const std::string text = token_text(entry.token_id);
        top.push_back({{"token", text}, {"logprob", entry.logprob}, {"bytes", byte_list(text)}});
      }
      const std::string text = token_text(position.token_id);
      content.push_back({{"token", text},
                         {"logprob", position.logprob},
                         {"bytes", byte_list(text)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(),
       offsets = Json::array();
  for (const PositionLogprobs& position : update.logprobs) {
    const std::string text = token_text(position.token_id);
    tokens.push_back(text);
    token_logprobs.push_back(position.logprob);
    Json top = Json::object();
    for (const TokenLogprob& entry : position.top) top[token_text(entry.token_id)] = entry.logprob;
    top_logprobs.push_back(std::move(top));
    offsets.push_back(choice.text_offset);
    choice.text_offset += text.size();
  }
  return {{"text_offset", std::move(offsets)},
          {"token_logprobs", std::move(token_logprobs)},
          {"tokens", std::move(tokens)},
          {"top_logprobs", std::move(top_logprobs)}};
}

void OpenAiResponse::append_logprobs(Choice& choice, const Json& more) {
  if (more.is_null()) return;
  if (choice.logprobs.is_null()) {
    choice.logprobs = more;
    return;
  }
  for (const auto& [key, values] : more.items()) {
    for (const Json& value : values) choice.logprobs[key].push_back(value);
  }
}

Json OpenAiResponse::chunk(size_t index, const ChoiceUpdate& update, Json logprobs) const {
  Json choice = {{"index", index}};
  if (api_ == OpenAiApi::kChat) {
    choice["delta"] =
        update.text.empty() && update.finished ? Json::object() : Json{{"content", update.text}};
  } else {
    choice["text"] = update.text;
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = update.finished ? Json(update.finish_reason) : Json(nullptr);
  Json body = envelope(api_ == OpenAiApi::kChat ? "chat.completion.chunk" : "text_completion");
  body["choices"] = Json::array({std::move(choice)});
  return body;
}

std::string OpenAiResponse::start_events() const {
  if (api_ != OpenAiApi::kChat) return "";
  std::string events;
  for (size_t i = 0; i < choices_.size(); ++i) {
    Json body = envelope("chat.completion.chunk");
    body["choices"] = Json::array({{{"index", i},
                                    {"delta", {{"role", "assistant"}, {"content", ""}}},
                                    {"logprobs", nullptr},
                                    {"finish_reason", nullptr}}});
    events += sse_event(body);
  }
  return events;
}

std::string OpenAiResponse::events(std::vector<std::pair<size_t, ChoiceUpdate>> updates) {
  std::string events;
  for (auto& [index, update] : updates) {
    if (done_) break;
    Choice& choice = choices_.at(index);
    if (!update.error.empty()) {
      events += sse_event(ApiError(update.error_status, update.error).body());
      events += kDone;
      done_ = true;
      break;
    }
    Json logprobs = logprobs_json(choice, update);
    if (!update.text.empty() || !logprobs.is_null() || update.finished) {
      events += sse_event(chunk(index, update, std::move(logprobs)));
    }
    if (update.finished) {
      choice.last = std::move(update);
      choice.finished = true;
      ++num_finished_;
    }
  }
  if (!done_ && finished()) {
    if (include_usage_) {
      Json body = envelope(api_ == OpenAiApi::kChat ? "chat.completion.chunk" : "text_completion");
      body["choices"] = Json::array();
      body["usage"] = usage();
      events += sse_event(body);
    }
    events += kDone;
    done_ = true;
  }
  return events;
}

void OpenAiResponse::add(std::vector<std::pair<size_t, ChoiceUpdate>> updates) {
  for (auto& [index, update] : updates) {
    Choice& choice = choices_.at(index);
    choice.text += update.text;
    append_logprobs(choice, logprobs_json(choice, update));
    if (update.finished) {
      choice.last = std::move(update);
      choice.finished = true;
      ++num_finished_;
    }
  }
}

const ChoiceUpdate* OpenAiResponse::error() const {
  for (const Choice& choice : choices_) {
    if (choice.finished && !choice.last.error.empty()) return &choice.last;
  }
  return nullptr;
}

Json OpenAiResponse::response() const {
  const bool chat = api_ == OpenAiApi::kChat;
  Json body = envelope(chat ? "chat.completion" : "text_completion");
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& choice = choices_[i];
    Json entry = {{"index", i}};
    if (chat) {
      entry["message"] = {{"role", "assistant"}, {"content", choice.text}};
    } else {
      entry["text"] = choice.text;
    }
    entry["logprobs"] = choice.logprobs;
    entry["finish_reason"] = choice.last.finish_reason;
    choices.push_back(std::move(entry));
  }
  body["choices"] = std::move(choices);
  body["usage"] = usage();
  return body;
}

}  // namespace nanovllm
