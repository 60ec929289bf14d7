// The text <-> token id conversion of a Hugging Face byte-level BPE tokenizer (Qwen2/Qwen3,
// Llama 3, GPT-2 style), loaded from a model directory. Encoding matches the `tokenizers`
// library token for token; decoding matches its output string.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

struct TokenizerImpl;

// A cheap handle: copies share the same loaded tables. Safe to use from many threads.
class Tokenizer {
 public:
  // Loads dir/tokenizer.json and, when present, dir/tokenizer_config.json (special token
  // names, add_bos_token/add_eos_token, added_tokens_decoder, chat_template) and
  // dir/chat_template.jinja (the template when tokenizer_config.json has none).
  // Throws Error naming the file and the problem.
  static Tokenizer from_dir(const std::filesystem::path& dir);
  // Loads a tokenizer.json alone, or with a tokenizer_config.json.
  static Tokenizer from_files(const std::filesystem::path& tokenizer_json,
                              const std::optional<std::filesystem::path>& tokenizer_config = {});

  // text must be valid UTF-8 (Error otherwise). Added and special tokens written in the text
  // become their ids. add_special_tokens adds what tokenizer.json's post-processor adds
  // (Qwen3: nothing; Llama 3: BOS), as transformers 5 does.
  std::vector<int> encode(std::string_view text, bool add_special_tokens = false) const;

  // An id outside [0, vocab_size()) or one no token has adds no text, as in Hugging Face's
  // decode (a model's vocabulary is often padded past the tokenizer's). Byte sequences that
  // are not valid UTF-8 come out as U+FFFD, one per maximal invalid subpart.
  std::string decode(std::span<const int> ids, bool skip_special_tokens = false) const;

  // One past the largest token id (vocabulary and added tokens).
  int vocab_size() const;
  std::optional<int> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int id) const;
  // Whether decode(..., skip_special_tokens = true) drops this id.
  bool is_special_token(int id) const;

  // From tokenizer_config.json.
  std::optional<std::string> bos_token() const;
  std::optional<std::string> eos_token() const;
  std::optional<std::string> pad_token() const;
  std::optional<int> bos_token_id() const;
  std::optional<int> eos_token_id() const;
  std::optional<int> pad_token_id() const;
  // tokenizer_config.json's flags, when it sets them (encode does not consult them).
  std::optional<bool> add_bos_token() const;
  std::optional<bool> add_eos_token() const;
  const std::optional<std::string>& chat_template() const;

  const TokenizerImpl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const TokenizerImpl> impl_;
};

}  // namespace nanovllm
