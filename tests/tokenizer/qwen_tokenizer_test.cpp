// The Qwen3 tokenizer against the ids Hugging Face tokenizers produced (reference_cases.json),
// plus round trips, special tokens in text, and what tokenizer_config.json provides.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "core/check.h"
#include "test_files.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm {
namespace {

using testing::qwen_dir;

const Tokenizer& qwen() {
  static const Tokenizer tokenizer = Tokenizer::from_dir(qwen_dir());
  return tokenizer;
}

nlohmann::json reference_cases() {
  std::ifstream in(qwen_dir() / "reference_cases.json");
  return nlohmann::json::parse(in);
}

TEST(QwenTokenizer, EncodesEveryReferenceCaseLikeHuggingFace) {
  const nlohmann::json cases = reference_cases().at("cases");
  ASSERT_GT(cases.size(), 40u);
  for (const auto& c : cases) {
    const std::string text = c.at("text");
    EXPECT_EQ(qwen().encode(text), c.at("ids").get<std::vector<int>>()) << text;
  }
}

TEST(QwenTokenizer, DecodeOfEncodeIsTheNfcText) {
  std::vector<std::string> texts;
  const nlohmann::json cases = reference_cases().at("cases");
  for (const auto& c : cases) texts.push_back(c.at("text"));
  // Decomposed input comes back composed: encode normalizes to NFC first.
  texts.insert(texts.end(), {"cafe\u0301", "A\u030A\u0323 ring", "\u1100\u1161\u11A8",
                             "e\u0301\u0301\u0327", "", " ",
                             "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0"
                             "\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7"});
  for (const std::string& text : texts) {
    EXPECT_EQ(qwen().decode(qwen().encode(text)),
              normalize_reference(text, NormalizationForm::kNFC))
        << text;
  }
}

TEST(QwenTokenizer, SpecialTokensInsideTextBecomeTheirIds) {
  const int im_start = *qwen().token_to_id("<|im_start|>");
  const int im_end = *qwen().token_to_id("<|im_end|>");
  EXPECT_EQ(im_start, 151644);
  EXPECT_EQ(im_end, 151645);
  const std::vector<int> ids = qwen().encode("<|im_start|>user\nHello!<|im_end|>\n");
  // <|im_start|> user \n Hello ! <|im_end|> \n, as in the chat reference case.
  EXPECT_EQ(ids, (std::vector<int>{151644, 872, 198, 9707, 0, 151645, 198}));
  // A partial special token is plain text.
  const std::vector<int> partial = qwen().encode("<|im_start");
  EXPECT_EQ(std::count(partial.begin(), partial.end(), im_start), 0);
  // Adjacent special tokens and tokens glued to words.
  EXPECT_EQ(qwen().encode("<|im_end|><|im_end|>"), (std::vector<int>{im_end, im_end}));
  const std::vector<int> glued = qwen().encode("a<|im_end|>b");
  ASSERT_EQ(glued.size(), 3u);
  EXPECT_EQ(glued[1], im_end);
}

TEST(QwenTokenizer, SkipSpecialTokensDropsOnlySpecialOnes) {
  // <think> is an added token that is not special: it stays.
  const std::vector<int> ids =
      qwen().encode("<|im_start|>assistant\n<think>\nhi</think><|im_end|>");
  EXPECT_EQ(qwen().decode(ids), "<|im_start|>assistant\n<think>\nhi</think><|im_end|>");
  EXPECT_EQ(qwen().decode(ids, /*skip_special_tokens=*/true), "assistant\n<think>\nhi</think>");
  EXPECT_TRUE(qwen().is_special_token(151645));
  EXPECT_FALSE(qwen().is_special_token(*qwen().token_to_id("<think>")));
  EXPECT_FALSE(qwen().is_special_token(9707));
}

TEST(QwenTokenizer, AddSpecialTokensAddsNothingForQwen) {
  EXPECT_EQ(qwen().encode("Hello, world!", true), qwen().encode("Hello, world!", false));
}

TEST(QwenTokenizer, ConfigProvidesSpecialTokensAndChatTemplate) {
  EXPECT_EQ(qwen().eos_token(), "<|im_end|>");
  EXPECT_EQ(qwen().eos_token_id(), 151645);
  EXPECT_EQ(qwen().pad_token(), "<|endoftext|>");
  EXPECT_EQ(qwen().pad_token_id(), 151643);
  EXPECT_EQ(qwen().bos_token(), std::nullopt);
  EXPECT_EQ(qwen().bos_token_id(), std::nullopt);
  ASSERT_TRUE(qwen().chat_template().has_value());
  EXPECT_NE(qwen().chat_template()->find("<|im_start|>"), std::string::npos);
  // 151,643 BPE tokens plus 26 added tokens.
  EXPECT_EQ(qwen().vocab_size(), 151669);
  EXPECT_EQ(qwen().id_to_token(9707), "Hello");
  EXPECT_EQ(qwen().id_to_token(151668), "</think>");
  EXPECT_EQ(qwen().id_to_token(151669), std::nullopt);
  EXPECT_EQ(qwen().token_to_id("Hello"), 9707);
  EXPECT_EQ(qwen().token_to_id("no such token"), std::nullopt);
}

// Qwen3's embedding has 151,936 rows but the tokenizer 151,669 ids: the padding ids a model
// may still sample add no text, as in Hugging Face's decode.
TEST(QwenTokenizer, DecodeDropsIdsWithoutAToken) {
  const std::vector<int> padded = {9707, 151669, 151850, 151935, 9707};
  EXPECT_EQ(qwen().decode(padded), "HelloHello");
  const std::vector<int> negative = {-1, 9707};
  EXPECT_EQ(qwen().decode(negative), "Hello");
  const std::vector<int> only_padding = {151850};
  EXPECT_EQ(qwen().decode(only_padding, true), "");
}

TEST(QwenTokenizer, DecodeReplacesBrokenUtf8LikeHuggingFace) {
  // "中" is E4 B8 AD; its bytes are separate tokens in the byte alphabet.
  const int e4 = *qwen().token_to_id("ä");  // byte 0xE4
  const int b8 = *qwen().token_to_id("¸");  // byte 0xB8
  const int ad = *qwen().token_to_id("Ń");  // byte 0xAD (shifted into U+0143)
  EXPECT_EQ(qwen().decode(std::vector<int>{e4, b8, ad}), "中");
  EXPECT_EQ(qwen().decode(std::vector<int>{e4, b8}), "\uFFFD");
  EXPECT_EQ(qwen().decode(std::vector<int>{b8, e4}), "\uFFFD\uFFFD");
  EXPECT_EQ(qwen().decode(std::vector<int>{e4, 9707}), "\uFFFDHello");
}

TEST(QwenTokenizer, EncodeRejectsInvalidUtf8) {
  EXPECT_THROW(qwen().encode("ok \xFF bad"), Error);
  EXPECT_THROW(qwen().encode("truncated \xE4\xB8"), Error);
  EXPECT_THROW(qwen().encode("\xED\xA0\x80 surrogate"), Error);
}

TEST(QwenTokenizer, LongInputsEncodeAndRoundTrip) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "word" + std::to_string(i) + (i % 7 ? " " : "\n\n");
  text += std::string(100000, 'a') + std::string(50000, ' ') + "end";
  const std::vector<int> ids = qwen().encode(text);
  EXPECT_EQ(qwen().decode(ids), text);
}

TEST(QwenTokenizer, CanBeUsedFromManyThreadsAtOnce) {
  const std::vector<int> want = qwen().encode("The quick brown fox, 你好, 12345 😀");
  std::vector<std::thread> threads;
  std::atomic<int> mismatches = 0;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (qwen().encode("The quick brown fox, 你好, 12345 😀") != want) ++mismatches;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace nanovllm
