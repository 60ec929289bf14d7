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
};

// Makes one decoder per request; the prompt gives it context (spacing, partial characters).
using TokenTextDecoderFactory =
    std::function<std::unique_ptr<TokenTextDecoder>(std::span<const int> prompt_token_ids)>;

}  // namespace nanovllm
