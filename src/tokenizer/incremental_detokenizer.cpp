#include "tokenizer/incremental_detokenizer.h"

#include <utility>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace nanovllm {

IncrementalDetokenizer::IncrementalDetokenizer(Tokenizer tokenizer, bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int id) {
  const TokenDecoder& decoder = tokenizer_.impl().decoder;
  // A model's vocabulary is often padded past the tokenizer's; a generated id with no token
  // adds no text (as Hugging Face's decode and vLLM do) rather than failing the request.
  if (!decoder.has_token(id)) return {};
  if (skip_special_tokens_ && decoder.is_special(id)) return {};
  std::string out;
  if (decoder.kind() == TokenDecoder::Kind::kJoinWithSpaces) {
    // Tokens are whole strings here; nothing is ever held back.
    if (!first_token_) out.push_back(' ');
    out.append(decoder.piece(id));
    first_token_ = false;
    return out;
  }
  pending_.append(decoder.piece(id));
  const std::size_t consumed = utf8::append_lossy_complete(out, pending_);
  pending_.erase(0, consumed);
  return out;
}

std::string IncrementalDetokenizer::finish() {
  std::string out;
  utf8::append_lossy(out, pending_);
  pending_.clear();
  first_token_ = true;
  return out;
}

}  // namespace nanovllm
