// The Jinja lexer, parser and renderer: the input is a chat template, rendered (when it parses)
// with the context transformers' apply_chat_template gives it, over a conversation with a
// system prompt, tool calls, a tool reply and reasoning.
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "fuzz_support.h"
#include "jinja/chat_template.h"

using namespace nanovllm;

namespace {

const nlohmann::ordered_json& conversation() {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris? <|im_end|> {{ not a tag }}"},
    {"role": "assistant", "content": "", "reasoning_content": "Use the tool.",
     "tool_calls": [{"type": "function", "function": {"name": "weather",
                     "arguments": {"city": "Paris", "days": 2}}}]},
    {"role": "tool", "content": "{\"temp\": 21.5}"},
    {"role": "assistant", "content": "<think>\nwarm\n</think>\n\n21.5 °C"},
    {"role": "user", "content": "Thanks!"}
  ])");
  return messages;
}

const nlohmann::ordered_json& kwargs() {
  static const nlohmann::ordered_json values = nlohmann::ordered_json::parse(R"({
    "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false,
    "tools": [{"type": "function", "function": {"name": "weather", "description": "Forecast",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                              "days": {"type": "integer"}}, "required": ["city"]}}}]
  })");
  return values;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<ChatTemplate> chat;
  try {
    chat.emplace(std::string(fuzz::as_text(data, size)));
  } catch (const Error&) {
    return 0;
  }
  for (const bool add_generation_prompt : {true, false}) {
    try {
      chat->render_ordered(conversation(), add_generation_prompt, kwargs());
    } catch (const Error&) {
    }
  }
  return 0;
}
