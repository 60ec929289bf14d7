// Builds a TokenizerImpl from tokenizer.json (and tokenizer_config.json), rejecting with a
// clear Error whatever it does not support or cannot parse.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

namespace nanovllm {

struct TokenizerImpl;

std::shared_ptr<TokenizerImpl> load_tokenizer_dir(const std::filesystem::path& dir);

// chat_template_file is read when the config has no chat template.
std::shared_ptr<TokenizerImpl> load_tokenizer_files(
    const std::filesystem::path& tokenizer_json,
    const std::optional<std::filesystem::path>& tokenizer_config,
    const std::optional<std::filesystem::path>& chat_template_file);

}  // namespace nanovllm
