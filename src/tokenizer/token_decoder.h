// Turns token ids back into text (tokenizer.json "decoder"): ByteLevel maps each token's
// characters back to bytes and decodes the bytes as UTF-8, replacing invalid sequences with
// U+FFFD; without a decoder, tokens are joined with spaces.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

class TokenDecoder {
 public:
  enum class Kind { kJoinWithSpaces, kByteLevel };

  TokenDecoder() = default;
  // tokens[id]: the token string decode() sees for id (added content or vocabulary entry),
  // nullopt where no token has that id; special[id]: skipped with skip_special_tokens.
  TokenDecoder(Kind kind, const std::vector<std::optional<std::string>>& tokens,
               std::vector<bool> special);

  Kind kind() const { return kind_; }
  int id_limit() const { return static_cast<int>(pieces_.size()); }
  bool has_token(int id) const { return id >= 0 && id < id_limit() && pieces_[id].has_value(); }
  bool is_special(int id) const { return special_[id]; }

  // What id contributes before the final UTF-8 conversion: bytes for ByteLevel (a token
  // with characters outside the byte alphabet contributes its own UTF-8), the token text
  // otherwise. id must be valid.
  std::string_view piece(int id) const { return *pieces_[id]; }

  // Ids with no token add nothing: a model's vocabulary is often padded past the tokenizer's,
  // and Hugging Face's decode drops such ids too.
  std::string decode(std::span<const int> ids, bool skip_special_tokens) const;

 private:
  Kind kind_ = Kind::kJoinWithSpaces;
  std::vector<std::optional<std::string>> pieces_;
  std::vector<bool> special_;
};

}  // namespace nanovllm
