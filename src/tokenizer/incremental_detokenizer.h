// Streaming detokenization: token ids go in one at a time, text comes out as soon as it is
// final. A UTF-8 character split across tokens is held back until its last byte arrives, so
// no piece ever ends in a broken sequence, and the pieces (including finish()) concatenate to
// exactly tokenizer.decode(all ids, skip_special_tokens).
//
// skip_special_tokens is fixed for the stream and behaves as in decode: a skipped token
// contributes nothing, so the bytes on either side of it join as if it were absent (decode
// drops special tokens before turning bytes into text, and so does this). A special token
// that is not skipped ends any held-back incomplete character, which becomes U+FFFD.
#pragma once

#include <string>

#include "tokenizer/tokenizer.h"

namespace nanovllm {

class IncrementalDetokenizer {
 public:
  // Shares the tokenizer's tables (a Tokenizer is a cheap handle), so the detokenizer may
  // outlive the Tokenizer object it was made from.
  explicit IncrementalDetokenizer(Tokenizer tokenizer, bool skip_special_tokens = false);

  // Adds one token; returns the text that became final (possibly empty). An id the tokenizer
  // has no token for adds nothing, as in decode.
  std::string push(int id);

  // Ends the stream: returns the held-back bytes as U+FFFD (one per invalid subpart), or
  // nothing. The detokenizer can then start a new stream.
  std::string finish();

  // Bytes of an incomplete character waiting for more tokens (0 to 3).
  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  bool first_token_ = true;  // for decoders that join tokens with spaces
  std::string pending_;
};

}  // namespace nanovllm
