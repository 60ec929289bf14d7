// Properties every loaded tokenizer keeps, checked by the tokenizer fuzz targets.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm::fuzz {

// The incremental detokenizer's pieces add up to decode() of the same ids, whichever ids they
// are (past the vocabulary too), with and without special tokens.
inline void check_streaming_matches_decode(const Tokenizer& tokenizer, std::span<const int> ids) {
  for (const bool skip_special_tokens : {false, true}) {
    IncrementalDetokenizer detokenizer(tokenizer, skip_special_tokens);
    std::string streamed;
    for (const int id : ids) streamed += detokenizer.push(id);
    streamed += detokenizer.finish();
    FUZZ_ASSERT(streamed == tokenizer.decode(ids, skip_special_tokens));
  }
}

}  // namespace nanovllm::fuzz
