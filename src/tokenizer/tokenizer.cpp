#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <unordered_set>

#include "core/check.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_json_loader.h"
#include "tokenizer/utf8.h"

namespace nanovllm {

// ---- TokenizerImpl ----

void TokenizerImpl::finish(TokenDecoder::Kind decoder_kind) {
  raw_matcher = std::make_unique<AddedTokenMatcher>(added_tokens, false, normalizer);
  normalized_matcher = std::make_unique<AddedTokenMatcher>(added_tokens, true, normalizer);
  vocab_size = model->id_limit();
  std::unordered_set<std::string> special_contents;
  for (const AddedToken& t : added_tokens) {
    added_ids[t.content] = t.id;
    vocab_size = std::max(vocab_size, t.id + 1);
    if (t.special) special_contents.insert(t.content);
  }
  // decode() sees an added token's content where there is one, else the vocabulary entry;
  // a token is special when that string is the content of a special added token.
  tokens.assign(vocab_size, std::nullopt);
  for (int id = 0; id < model->id_limit(); ++id) {
    if (const std::string* t = model->id_to_token(id)) tokens[id] = *t;
  }
  for (const AddedToken& t : added_tokens) tokens[t.id] = t.content;
  std::vector<bool> special(vocab_size, false);
  for (int id = 0; id < vocab_size; ++id) {
    special[id] = tokens[id] && special_contents.contains(*tokens[id]);
  }
  decoder = TokenDecoder(decoder_kind, tokens, std::move(special));
}

std::optional<int> TokenizerImpl::token_to_id(std::string_view token) const {
  if (const auto it = added_ids.find(std::string(token)); it != added_ids.end()) return it->second;
  return model->token_to_id(token);
}

std::vector<int> TokenizerImpl::encode(std::string_view text, bool add_special_tokens) const {
  if (const auto bad = utf8::find_invalid(text)) {
    throw Error(fmt::format("encode: text is not valid UTF-8 (byte {} of {})", *bad, text.size()));
  }
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 4);
  WordCache& cache = model->thread_cache();
  // Pass 1: added tokens that match the raw text.
  if (raw_matcher->empty()) {
    encode_normalized(normalizer.empty() ? std::string(text) : normalizer.normalize(text), cache,
                      ids);
  } else {
    std::vector<TextSegment> segments;
    raw_matcher->split(text, segments);
    for (const TextSegment& s : segments) {
      if (s.id >= 0) {
        ids.push_back(s.id);
      } else {
        const std::string_view piece = text.substr(s.begin, s.end - s.begin);
        encode_normalized(normalizer.empty() ? std::string(piece) : normalizer.normalize(piece),
                          cache, ids);
      }
    }
  }
  return add_special_tokens ? post_processor.apply(std::move(ids)) : ids;
}

void TokenizerImpl::encode_normalized(std::string_view text, WordCache& cache,
                                      std::vector<int>& ids) const {
  const auto encode_words = [&](std::string_view piece) {
    pre_tokenizer.split(piece,
                        [&](std::string_view word) { model->encode_word(word, cache, ids); });
  };
  // Pass 2: added tokens that match the normalized text.
  if (normalized_matcher->empty()) {
    encode_words(text);
    return;
  }
  std::vector<TextSegment> segments;
  normalized_matcher->split(text, segments);
  for (const TextSegment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      encode_words(text.substr(s.begin, s.end - s.begin));
    }
  }
}

// ---- Tokenizer ----

Tokenizer Tokenizer::from_dir(const std::filesystem::path& dir) {
  return Tokenizer(load_tokenizer_dir(dir));
}

Tokenizer Tokenizer::from_files(const std::filesystem::path& tokenizer_json,
                                const std::optional<std::filesystem::path>& tokenizer_config) {
  return Tokenizer(load_tokenizer_files(tokenizer_json, tokenizer_config, std::nullopt));
}

std::vector<int> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}

std::string Tokenizer::decode(std::span<const int> ids, bool skip_special_tokens) const {
  return impl_->decoder.decode(ids, skip_special_tokens);
}

int Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}

std::optional<int> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int id) const {
  if (id < 0 || id >= impl_->vocab_size) return std::nullopt;
  return impl_->tokens[id];
}

bool Tokenizer::is_special_token(int id) const {
  return id >= 0 && id < impl_->vocab_size && impl_->decoder.is_special(id);
}

std::optional<std::string> Tokenizer::bos_token() const {
  return impl_->config.bos_token;
}
std::optional<std::string> Tokenizer::eos_token() const {
  return impl_->config.eos_token;
}
std::optional<std::string> Tokenizer::pad_token() const {
  return impl_->config.pad_token;
}

namespace {
std::optional<int> id_of(const TokenizerImpl& impl, const std::optional<std::string>& token) {
  if (!token) return std::nullopt;
  return impl.token_to_id(*token);
}
}  // namespace

std::optional<int> Tokenizer::bos_token_id() const {
  return id_of(*impl_, impl_->config.bos_token);
}
std::optional<int> Tokenizer::eos_token_id() const {
  return id_of(*impl_, impl_->config.eos_token);
}
std::optional<int> Tokenizer::pad_token_id() const {
  return id_of(*impl_, impl_->config.pad_token);
}

std::optional<bool> Tokenizer::add_bos_token() const {
  return impl_->config.add_bos_token;
}
std::optional<bool> Tokenizer::add_eos_token() const {
  return impl_->config.add_eos_token;
}

const std::optional<std::string>& Tokenizer::chat_template() const {
  return impl_->config.chat_template;
}

}  // namespace nanovllm
