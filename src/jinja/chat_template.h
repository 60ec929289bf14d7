// Renders a conversation with a Hugging Face chat template the way transformers'
// apply_chat_template(tokenize=False) does.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "jinja/template.h"

namespace nanovllm {

class ChatTemplate {
 public:
  // Parses once; throws jinja::TemplateError on syntax errors.
  explicit ChatTemplate(std::string source);

  // messages: array of message objects. extra_kwargs: more template variables, e.g.
  // {"enable_thinking": false, "bos_token": "...", "eos_token": "...", "tools": [...]}; `tools` and
  // `documents` default to none as in transformers. As in transformers, a message's reasoning given
  // under `reasoning_content`, `thinking` or `reasoning` is visible under the first two names.
  // nlohmann::json sorts object keys, which shows wherever a template prints an object (tojson of
  // tools); use render_ordered to keep the caller's key order as Python dicts do.
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& extra_kwargs = nlohmann::json::object()) const;
  std::string render_ordered(
      const nlohmann::ordered_json& messages, bool add_generation_prompt,
      const nlohmann::ordered_json& extra_kwargs = nlohmann::ordered_json::object()) const;

 private:
  jinja::Template template_;
};

}  // namespace nanovllm
