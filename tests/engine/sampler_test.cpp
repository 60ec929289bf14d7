// The engine's host sampler: the CPU backend's rule behind a per-row API (greedy, NaN rows,
// determinism per (seed, position), distributions, logprobs). The rule itself is tested in
// tests/kernels/sampling_test.cpp.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/cpu_ops.h"

namespace nanovllm {
namespace {

SamplingParams random_params(float temperature = 1.0f, int top_k = 0, float top_p = 1.0f) {
  SamplingParams params;
  params.temperature = temperature;
  params.top_k = top_k;
  params.top_p = top_p;
  return params;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double max_logit = -INFINITY;
  for (float x : logits) max_logit = std::max<double>(max_logit, x);
  std::vector<double> probs;
  double sum = 0;
  for (float x : logits) {
    probs.push_back(std::exp((x - max_logit) / temperature));
    sum += probs.back();
  }
  for (double& p : probs) p /= sum;
  return probs;
}

std::vector<float> random_logits(std::mt19937_64& gen, int vocab) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = normal(gen);
  return logits;
}

TEST(Sampler, GreedyPicksTheLargestLogitLowestIdOnTies) {
  EXPECT_EQ(
      sample_token(std::vector<float>{0.1f, -2.0f, 5.0f, 4.9f}, random_params(0.0f), 1, 0).token_id,
      2);
  EXPECT_EQ(
      sample_token(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f, 3.0f}, random_params(0.0f), 1, 0)
          .token_id,
      1);
  EXPECT_EQ(
      sample_token(std::vector<float>{NAN, 1.0f, 2.0f, NAN}, random_params(0.0f), 1, 0).token_id,
      2);
}

TEST(Sampler, AllNaNLogitsAreAnError) {
  EXPECT_THROW(sample_token(std::vector<float>{NAN, NAN}, random_params(0.0f), 1, 0), Error);
  EXPECT_THROW(sample_token(std::vector<float>{NAN, NAN}, random_params(1.0f), 1, 0), Error);
}

TEST(Sampler, IsTheCpuBackendRule) {
  std::mt19937_64 gen(3);
  std::vector<uint64_t> scratch;
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> logits = random_logits(gen, 97);
    const SamplingParams params =
        random_params(0.5f + 0.01f * trial, trial % 3 ? 10 : 0, trial % 2 ? 0.8f : 1.0f);
    const uint64_t seed = gen();
    const cpu::RowSamplingParams row{params.temperature, params.top_k, params.top_p, seed, trial};
    EXPECT_EQ(sample_token(logits, params, seed, trial).token_id,
              cpu::sample_row(logits.data(), 97, row, scratch));
  }
}

TEST(Sampler, TokensArePureFunctionsOfSeedAndPosition) {
  std::mt19937_64 gen(4);
  const std::vector<float> logits = random_logits(gen, 500);
  const SamplingParams params = random_params(1.5f);
  std::set<int> by_position, by_seed;
  for (int position = 0; position < 100; ++position) {
    const int token = sample_token(logits, params, 1234, position).token_id;
    EXPECT_EQ(sample_token(logits, params, 1234, position).token_id, token);
    by_position.insert(token);
    by_seed.insert(sample_token(logits, params, 1000 + position, 7).token_id);
  }
  EXPECT_GT(by_position.size(), 20u);
  EXPECT_GT(by_seed.size(), 20u);
}

TEST(Sampler, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
  const int draws = 100000;
  for (float temperature : {1.0f, 0.6f}) {
    std::vector<double> counts(logits.size(), 0.0);
    for (int n = 0; n < draws; ++n) {
      counts[sample_token(logits, random_params(temperature), 99, n).token_id] += 1.0 / draws;
    }
    const std::vector<double> expected = softmax(logits, temperature);
    for (size_t i = 0; i < logits.size(); ++i) {
      const double sigma = std::sqrt(expected[i] * (1 - expected[i]) / draws);
      EXPECT_NEAR(counts[i], expected[i], 5 * sigma) << "token " << i;
    }
  }
}

TEST(Sampler, NeverSamplesAMinusInfinityToken) {
  const std::vector<float> logits = {-INFINITY, 0.0f, -INFINITY, 0.0f};
  for (int n = 0; n < 1000; ++n) {
    const int token = sample_token(logits, random_params(1.0f), 3, n).token_id;
    EXPECT_TRUE(token == 1 || token == 3);
  }
}

TEST(Sampler, LogprobsEqualLogSoftmaxOfRawLogits) {
  std::mt19937_64 gen(5);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits = random_logits(gen, 100);
    logits[3] = logits[60] = 9.0f;                         // a tie at the top
    SamplingParams params = random_params(0.7f, 5, 0.8f);  // ignored by logprobs
    params.logprobs = 4;
    const SampleResult result = sample_token(logits, params, 6, trial);
    ASSERT_TRUE(result.logprobs.has_value());
    const PositionLogprobs& lp = *result.logprobs;
    const std::vector<double> probs = softmax(logits);
    EXPECT_EQ(lp.token_id, result.token_id);
    EXPECT_NEAR(lp.logprob, std::log(probs[result.token_id]), 1e-5);
    int rank = 1;
    for (float x : logits) rank += x > logits[result.token_id] ? 1 : 0;
    EXPECT_EQ(lp.rank, rank);
    ASSERT_EQ(lp.top.size(), 4u);
    EXPECT_EQ(lp.top[0].token_id, 3);
    EXPECT_EQ(lp.top[1].token_id, 60);
    std::vector<double> sorted = probs;
    std::sort(sorted.rbegin(), sorted.rend());
    for (size_t i = 0; i < lp.top.size(); ++i) {
      EXPECT_NEAR(lp.top[i].logprob, std::log(probs[lp.top[i].token_id]), 1e-5);
      EXPECT_NEAR(lp.top[i].logprob, std::log(sorted[i]), 1e-5);
    }
  }
}

TEST(Sampler, LogprobsZeroReportsOnlyTheSampledToken) {
  SamplingParams params = random_params(0.0f);
  params.logprobs = 0;
  const SampleResult result = sample_token(std::vector<float>{0.0f, 1.0f}, params, 1, 0);
  ASSERT_TRUE(result.logprobs.has_value());
  EXPECT_TRUE(result.logprobs->top.empty());
  EXPECT_NEAR(result.logprobs->logprob, std::log(std::exp(1.0) / (1 + std::exp(1.0))), 1e-6);
  EXPECT_EQ(result.logprobs->rank, 1);
  params.logprobs.reset();
  EXPECT_FALSE(sample_token(std::vector<float>{0.0f, 1.0f}, params, 1, 0).logprobs.has_value());
}

TEST(Sampler, TopLogprobsStopAtTheVocabulary) {
  const PositionLogprobs lp = token_logprobs(std::vector<float>{0.0f, 2.0f, 1.0f}, 2, 20);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token_id, 1);
  EXPECT_EQ(lp.top[1].token_id, 2);
  EXPECT_EQ(lp.top[2].token_id, 0);
  EXPECT_EQ(lp.rank, 2);
}

}  // namespace
}  // namespace nanovllm
