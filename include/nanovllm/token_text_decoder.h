// Incremental detokenization, supplied by the caller (the tokenizer provides the real one).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

namespace nanovllm {

class TokenTextDecoder {
 public:
  virtual ~TokenTextDecoder() = default;
  // Feeds one generated token; returns the text it completes (possibly empty, e.g. while a
  // UTF-8 sequence is still incomplete).
  virtual std::string push(int token_id) = 0;
  // Ends the stream: returns text still held back (e.g. an incomplete UTF-8 sequence, as
  // U+FFFD), so that the pieces add up to the one-shot decode.
  virtual std::string finish() { return {}; }
};

// Makes one decoder per request; the prompt gives it context (spacing, partial characters).
using TokenTextDecoderFactory =
    std::function<std::unique_ptr<TokenTextDecoder>(std::span<const int> prompt_token_ids)>;

}  // namespace nanovllm
