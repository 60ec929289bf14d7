// Chat messages -> prompt text with the tokenizer's chat template, as transformers'
// apply_chat_template does (bos/eos token strings passed to the template).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm {

class ChatPrompt {
 public:
  // Parses the tokenizer's chat template once; throws Error when it has none.
  explicit ChatPrompt(const Tokenizer& tokenizer);

  // kwargs are extra template variables (e.g. enable_thinking); they may override the
  // defaults (bos_token, eos_token).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& kwargs) const;

 private:
  ChatTemplate template_;
  nlohmann::ordered_json defaults_;
};

}  // namespace nanovllm
