#include "tokenizer/token_decoder.h"

#include "core/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace nanovllm {

TokenDecoder::TokenDecoder(Kind kind, const std::vector<std::optional<std::string>>& tokens,
                           std::vector<bool> special)
    : kind_(kind), pieces_(tokens.size()), special_(std::move(special)) {
  NVLLM_CHECK_EQ(special_.size(), tokens.size());
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (!tokens[id]) continue;
    if (kind_ == Kind::kByteLevel) {
      std::optional<std::string> bytes = alphabet.decode(*tokens[id]);
      pieces_[id] = bytes ? std::move(*bytes) : *tokens[id];
    } else {
      pieces_[id] = *tokens[id];
    }
  }
}

std::string TokenDecoder::decode(std::span<const int> ids, bool skip_special_tokens) const {
  std::string joined;
  bool first = true;
  for (const int id : ids) {
    if (!has_token(id)) continue;
    if (skip_special_tokens && special_[id]) continue;
    if (kind_ == Kind::kJoinWithSpaces && !first) joined.push_back(' ');
    joined.append(*pieces_[id]);
    first = false;
  }
  if (kind_ == Kind::kJoinWithSpaces) return joined;
  std::string text;
  text.reserve(joined.size());
  utf8::append_lossy(text, joined);
  return text;
}

}  // namespace nanovllm
