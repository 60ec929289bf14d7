// The parts a Tokenizer is made of, and the encode pipeline that runs them in order:
// added tokens in raw text -> normalizer -> added tokens in normalized text -> pre-tokenizer
// -> BPE per word -> post-processor.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_decoder.h"
#include "tokenizer/tokenizer_config.h"

namespace nanovllm {

struct TokenizerImpl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::vector<AddedToken> added_tokens;
  std::unique_ptr<AddedTokenMatcher> raw_matcher;         // tokens with normalized = false
  std::unique_ptr<AddedTokenMatcher> normalized_matcher;  // tokens with normalized = true
  std::unordered_map<std::string, int> added_ids;         // content -> id
  std::vector<std::optional<std::string>> tokens;         // id -> added content or vocab entry
  PostProcessor post_processor;
  TokenDecoder decoder;
  TokenizerConfig config;
  int vocab_size = 0;

  // Call once the parts are set: builds the matchers, the id tables and the decoder.
  void finish(TokenDecoder::Kind decoder_kind);

  std::vector<int> encode(std::string_view text, bool add_special_tokens) const;
  std::optional<int> token_to_id(std::string_view token) const;

 private:
  void encode_normalized(std::string_view text, WordCache& cache, std::vector<int>& ids) const;
};

}  // namespace nanovllm
