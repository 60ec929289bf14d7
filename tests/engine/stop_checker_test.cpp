// Appending tokens: EOS, stop token ids, stop strings (text cut before them), length limits.
#include "engine/stop_checker.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

namespace nanovllm {
namespace {

// Token t decodes to pieces_[t] (a letter for unknown ids).
class MapDecoder final : public TokenTextDecoder {
 public:
  explicit MapDecoder(std::map<int, std::string> pieces) : pieces_(std::move(pieces)) {}
  std::string push(int token_id) override {
    const auto it = pieces_.find(token_id);
    return it != pieces_.end() ? it->second
                               : std::string(1, static_cast<char>('a' + token_id % 26));
  }

 private:
  std::map<int, std::string> pieces_;
};

std::unique_ptr<Sequence> make_seq(const SamplingParams& params,
                                   std::map<int, std::string> pieces = {}) {
  auto seq = std::make_unique<Sequence>(0, std::vector<int>{1, 2, 3}, params, 0);
  seq->decoder = std::make_unique<MapDecoder>(std::move(pieces));
  return seq;
}

StopConditions conditions(std::vector<int> eos = {99}, int max_model_len = 1000) {
  StopConditions stop;
  stop.eos_token_ids = std::move(eos);
  stop.max_model_len = max_model_len;
  return stop;
}

bool push(Sequence& seq, int token, const StopConditions& stop = conditions()) {
  SampleResult sample;
  sample.token_id = token;
  return append_token_and_check_stop(seq, sample, stop);
}

TEST(StopChecker, AppendsTokenAndText) {
  auto seq = make_seq(SamplingParams{}, {{5, "he"}, {6, "llo"}});
  EXPECT_FALSE(push(*seq, 5));
  EXPECT_FALSE(push(*seq, 6));
  EXPECT_EQ(seq->text, "hello");
  EXPECT_EQ(seq->num_completion_tokens(), 2);
  EXPECT_EQ(seq->completion_token_ids().back(), 6);
}

// Holds every piece back until finish(), like a detokenizer in the middle of a character.
class HoldingDecoder final : public TokenTextDecoder {
 public:
  std::string push(int token_id) override {
    held_ += std::to_string(token_id);
    return {};
  }
  std::string finish() override { return std::exchange(held_, {}); }

 private:
  std::string held_;
};

TEST(StopChecker, FinishingFlushesTextTheDecoderHeldBack) {
  SamplingParams params;
  params.max_tokens = 2;
  auto seq = std::make_unique<Sequence>(0, std::vector<int>{1, 2, 3}, params, 0);
  seq->decoder = std::make_unique<HoldingDecoder>();
  EXPECT_FALSE(push(*seq, 4));
  EXPECT_EQ(seq->text, "");
  EXPECT_TRUE(push(*seq, 5));
  EXPECT_EQ(seq->finish_reason, "length");
  EXPECT_EQ(seq->text, "45");
}

TEST(StopChecker, AnyEosIdStops) {
  auto seq = make_seq(SamplingParams{});
  EXPECT_TRUE(push(*seq, 98, conditions({97, 98})));
  EXPECT_EQ(seq->finish_reason, "stop");
  EXPECT_EQ(seq->completion_token_ids().back(), 98);  // the EOS token is kept, as vLLM does
}

TEST(StopChecker, IgnoreEosKeepsGoing) {
  SamplingParams params;
  params.ignore_eos = true;
  auto seq = make_seq(params);
  EXPECT_FALSE(push(*seq, 99));
}

TEST(StopChecker, StopTokenIdStopsEvenWhenIgnoringEos) {
  SamplingParams params;
  params.ignore_eos = true;
  params.stop_token_ids = {7};
  auto seq = make_seq(params);
  EXPECT_TRUE(push(*seq, 7));
  EXPECT_EQ(seq->finish_reason, "stop");
}

TEST(StopChecker, StopStringCutsTheTextBeforeIt) {
  SamplingParams params;
  params.stop = {"END"};
  auto seq = make_seq(params, {{1, "ab"}, {2, "cE"}, {3, "NDxyz"}});
  EXPECT_FALSE(push(*seq, 1));
  EXPECT_FALSE(push(*seq, 2));
  EXPECT_TRUE(push(*seq, 3));  // "END" spans two tokens
  EXPECT_EQ(seq->text, "abc");
  EXPECT_EQ(seq->finish_reason, "stop");
  EXPECT_EQ(seq->num_completion_tokens(), 3);
}

TEST(StopChecker, EarliestOfSeveralStopStringsWins) {
  SamplingParams params;
  params.stop = {"zz", "b"};
  auto seq = make_seq(params, {{1, "abzzcb"}});
  EXPECT_TRUE(push(*seq, 1));
  EXPECT_EQ(seq->text, "a");
}

TEST(StopChecker, StopStringAtTheVeryStart) {
  SamplingParams params;
  params.stop = {"\n"};
  auto seq = make_seq(params, {{1, "\nrest"}});
  EXPECT_TRUE(push(*seq, 1));
  EXPECT_EQ(seq->text, "");
}

TEST(StopChecker, FindStopStringOnlyLooksAtMatchesEndingInNewText) {
  const std::vector<std::string> stops = {"abc"};
  EXPECT_EQ(find_stop_string("xxabc", 3, stops), 2u);
  EXPECT_EQ(find_stop_string("xxabc", 5, stops), std::string::npos);
  EXPECT_EQ(find_stop_string("abcab", 3, stops), std::string::npos);
  EXPECT_EQ(find_stop_string("abcab", 0, stops), 0u);
}

TEST(StopChecker, MaxTokensGivesLength) {
  SamplingParams params;
  params.max_tokens = 2;
  auto seq = make_seq(params);
  EXPECT_FALSE(push(*seq, 4));
  EXPECT_TRUE(push(*seq, 4));
  EXPECT_EQ(seq->finish_reason, "length");
}

TEST(StopChecker, MaxModelLenGivesLength) {
  auto seq = make_seq(SamplingParams{});
  EXPECT_FALSE(push(*seq, 4, conditions({99}, 5)));
  EXPECT_TRUE(push(*seq, 4, conditions({99}, 5)));
  EXPECT_EQ(seq->finish_reason, "length");
  EXPECT_EQ(seq->num_tokens(), 5);
}

TEST(StopChecker, StopWinsOverLengthOnTheSameToken) {
  SamplingParams params;
  params.max_tokens = 1;
  auto seq = make_seq(params);
  EXPECT_TRUE(push(*seq, 99));
  EXPECT_EQ(seq->finish_reason, "stop");
}

TEST(StopChecker, LogprobsKeptOnlyWhenRequested) {
  SamplingParams params;
  params.logprobs = 1;
  auto seq = make_seq(params);
  SampleResult sample;
  sample.token_id = 4;
  sample.logprobs = PositionLogprobs{4, -0.5f, 1, {{4, -0.5f}}};
  append_token_and_check_stop(*seq, sample, conditions());
  ASSERT_EQ(seq->logprobs.size(), 1u);
  EXPECT_EQ(seq->logprobs[0].logprob, -0.5f);
}

}  // namespace
}  // namespace nanovllm
