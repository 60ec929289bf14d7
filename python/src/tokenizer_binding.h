// nanovllm.Tokenizer: the C++ tokenizer and chat template, so that no transformers is needed.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <vector>

#include "llm/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm::python {

class PyTokenizer {
 public:
  explicit PyTokenizer(Tokenizer tokenizer) : tokenizer_(std::move(tokenizer)) {}

  std::vector<int> encode(nanobind::handle text, bool add_special_tokens) const;
  std::string decode(nanobind::handle ids, bool skip_special_tokens) const;
  // A str, or its token ids when `tokenize`; extra keyword arguments go to the template.
  nanobind::object apply_chat_template(nanobind::handle conversation, bool tokenize,
                                       bool add_generation_prompt,
                                       const nanobind::kwargs& kwargs) const;
  const Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  Tokenizer tokenizer_;
  mutable std::optional<ChatPrompt> chat_;  // parsed on first use
};

void bind_tokenizer(nanobind::module_& module);

}  // namespace nanovllm::python
