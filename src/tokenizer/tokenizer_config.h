// What a model directory's tokenizer_config.json adds to tokenizer.json: the names of the
// special tokens, the add_bos_token/add_eos_token flags, extra added tokens, and the chat
// template.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/added_tokens.h"

namespace nanovllm {

struct TokenizerConfig {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> unk_token;
  // Present only when the file sets them. Informational: encode follows tokenizer.json's
  // post-processor, as transformers 5 does for tokenizers loaded from tokenizer.json.
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  std::vector<AddedToken> added_tokens_decoder;  // ordered by id
  // The default chat template ("chat_template" as a string, or the entry named "default" of
  // a list of {name, template}).
  std::optional<std::string> chat_template;

  // Throws Error naming the file and the field for anything malformed.
  static TokenizerConfig load(const std::filesystem::path& path);
};

}  // namespace nanovllm
