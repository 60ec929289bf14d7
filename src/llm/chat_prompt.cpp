#include "llm/chat_prompt.h"

#include "core/check.h"

namespace nanovllm {
namespace {

std::string template_of(const Tokenizer& tokenizer) {
  const std::optional<std::string>& source = tokenizer.chat_template();
  if (!source) throw Error("the tokenizer has no chat_template, so chat messages cannot be used");
  return *source;
}

}  // namespace

ChatPrompt::ChatPrompt(const Tokenizer& tokenizer)
    : template_(template_of(tokenizer)), defaults_(nlohmann::ordered_json::object()) {
  if (auto bos = tokenizer.bos_token()) defaults_["bos_token"] = *bos;
  if (auto eos = tokenizer.eos_token()) defaults_["eos_token"] = *eos;
}

std::string ChatPrompt::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                               const nlohmann::ordered_json& kwargs) const {
  if (!messages.is_array() || messages.empty()) {
    throw Error("'messages' must be a non-empty list of {\"role\", \"content\"} objects");
  }
  for (const auto& message : messages) {
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      throw Error("every message must be an object with a string 'role'");
    }
  }
  if (!kwargs.is_object()) throw Error("chat template arguments must be a JSON object");
  nlohmann::ordered_json variables = defaults_;
  variables.update(kwargs);
  return template_.render_ordered(messages, add_generation_prompt, variables);
}

}  // namespace nanovllm
