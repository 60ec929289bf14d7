// Streaming detokenization: pieces are always valid UTF-8, incomplete characters are held
// back, and the pieces concatenate to the one-shot decode.
#include "tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "core/check.h"
#include "test_files.h"
#include "tokenizer/utf8.h"

namespace nanovllm {
namespace {

const Tokenizer& qwen() {
  static const Tokenizer tokenizer = Tokenizer::from_dir(testing::qwen_dir());
  return tokenizer;
}

// Streams ids and checks every piece is valid UTF-8; returns the concatenation.
std::string stream(const std::vector<int>& ids, bool skip_special_tokens) {
  IncrementalDetokenizer detokenizer(qwen(), skip_special_tokens);
  std::string text;
  const auto add = [&](const std::string& piece) {
    EXPECT_EQ(utf8::find_invalid(piece), std::nullopt) << "broken UTF-8 in a piece";
    text += piece;
  };
  for (const int id : ids) add(detokenizer.push(id));
  add(detokenizer.finish());
  return text;
}

TEST(IncrementalDetokenizer, MatchesDecodeOnEmojiCjkAndCombiningMarks) {
  const std::vector<std::string> texts = {"Hello, world!",
                                          "你好，世界！今天天气怎么样？",
                                          "👨‍👩‍👧‍👦 family 🇺🇸🇯🇵 flags",
                                          "e\u0301 a\u0308\u0323 \u0915\u094D\u0937",
                                          "🤌🏻 mixed 中文 and ASCII 123",
                                          "<|im_start|>user\nhi<|im_end|>\n<think>x</think>"};
  for (const std::string& text : texts) {
    const std::vector<int> ids = qwen().encode(text);
    for (const bool skip : {false, true}) {
      EXPECT_EQ(stream(ids, skip), qwen().decode(ids, skip)) << text;
    }
  }
}

TEST(IncrementalDetokenizer, HoldsBackIncompleteCharacters) {
  // 😀 is F0 9F 98 80: feed it one byte token at a time.
  const int f0 = *qwen().token_to_id("ð"), x9f = *qwen().token_to_id("Ł");
  const int x98 = *qwen().token_to_id("ĺ"), x80 = *qwen().token_to_id("Ģ");
  ASSERT_EQ(qwen().decode(std::vector<int>{f0, x9f, x98, x80}), "😀");
  IncrementalDetokenizer d(qwen());
  EXPECT_EQ(d.push(f0), "");
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.push(x9f), "");
  EXPECT_EQ(d.push(x98), "");
  EXPECT_EQ(d.pending_bytes(), 3u);
  EXPECT_EQ(d.push(x80), "😀");
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.finish(), "");
}

TEST(IncrementalDetokenizer, FinishTurnsAnUnfinishedCharacterIntoReplacement) {
  const int f0 = *qwen().token_to_id("ð"), x9f = *qwen().token_to_id("Ł");
  IncrementalDetokenizer d(qwen());
  EXPECT_EQ(d.push(9707), "Hello");
  EXPECT_EQ(d.push(f0), "");
  EXPECT_EQ(d.push(x9f), "");
  EXPECT_EQ(d.finish(), "\uFFFD");
  // The detokenizer starts a new stream after finish().
  EXPECT_EQ(d.push(9707), "Hello");
}

TEST(IncrementalDetokenizer, InvalidBytesBecomeReplacementAsSoonAsTheyAreKnownBad) {
  const int f0 = *qwen().token_to_id("ð");
  IncrementalDetokenizer d(qwen());
  EXPECT_EQ(d.push(f0), "");
  // 'H' cannot continue F0: the F0 is final now.
  EXPECT_EQ(d.push(9707), "\uFFFDHello");
}

TEST(IncrementalDetokenizer, SkippedSpecialTokensLetBytesAroundThemJoin) {
  // decode() drops skipped tokens before converting bytes to text, so E4 <|im_end|> B8 AD
  // decodes to "中" when skipping and to U+FFFD, "<|im_end|>", U+FFFD U+FFFD when not.
  const int e4 = *qwen().token_to_id("ä"), b8 = *qwen().token_to_id("¸");
  const int ad = *qwen().token_to_id("Ń"), im_end = 151645;
  const std::vector<int> ids = {e4, im_end, b8, ad};
  EXPECT_EQ(qwen().decode(ids, true), "中");
  EXPECT_EQ(stream(ids, true), "中");
  EXPECT_EQ(qwen().decode(ids, false), "\uFFFD<|im_end|>\uFFFD\uFFFD");
  EXPECT_EQ(stream(ids, false), "\uFFFD<|im_end|>\uFFFD\uFFFD");
}

TEST(IncrementalDetokenizer, RandomIdSequencesMatchDecode) {
  std::mt19937 rng(7);
  // Mostly byte tokens (ids of the 256 single-byte tokens) so characters split often.
  std::vector<int> bytes;
  for (const char* t : {"ä", "¸", "Ń", "ð", "Ł", "ĺ", "Ģ", "Ã", "©", "â", "Ģ", "ĭ", "Â", "a"}) {
    bytes.push_back(*qwen().token_to_id(t));
  }
  std::uniform_int_distribution<int> any_id(0, qwen().vocab_size() - 1);
  for (int round = 0; round < 300; ++round) {
    std::vector<int> ids;
    const int n = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) {
      const unsigned r = rng() % 10;
      ids.push_back(r < 6   ? bytes[rng() % bytes.size()]
                    : r < 8 ? any_id(rng)
                            : 151643 + rng() % 26);
    }
    for (const bool skip : {false, true}) EXPECT_EQ(stream(ids, skip), qwen().decode(ids, skip));
  }
}

// A model's padded vocabulary reaches past the tokenizer's: such ids add no text.
TEST(IncrementalDetokenizer, IdsWithoutATokenAddNoTextAndKeepState) {
  const int f0 = *qwen().token_to_id("ð"), x9f = *qwen().token_to_id("Ł");
  const int x98 = *qwen().token_to_id("ĺ"), x80 = *qwen().token_to_id("Ģ");
  IncrementalDetokenizer d(qwen());
  EXPECT_EQ(d.push(f0), "");
  EXPECT_EQ(d.push(qwen().vocab_size()), "");
  EXPECT_EQ(d.push(151935), "");
  EXPECT_EQ(d.push(-5), "");
  EXPECT_EQ(d.push(x9f), "");
  EXPECT_EQ(d.push(x98), "");
  EXPECT_EQ(d.push(x80), "😀");
}

TEST(IncrementalDetokenizer, OutlivesTheTokenizerObjectItWasMadeFrom) {
  std::optional<IncrementalDetokenizer> d;
  {
    const Tokenizer fresh = Tokenizer::from_dir(testing::qwen_dir());
    d.emplace(fresh, false);
  }
  EXPECT_EQ(d->push(9707), "Hello");
}

}  // namespace
}  // namespace nanovllm
