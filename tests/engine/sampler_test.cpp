// Sampler: greedy, temperature, top-k, top-p, per-sequence streams, logprobs; distributions
// are checked against a plain softmax computed here in double precision.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "core/check.h"

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

std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::vector<double> empirical(Sampler& sampler, const std::vector<float>& logits,
                              const SamplingParams& params, int draws, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<double> counts(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i) counts[sampler.sample(logits, params, rng).token_id] += 1;
  for (double& c : counts) c /= draws;
  return counts;
}

// Frequencies within 5 standard errors of the expected probabilities.
void expect_distribution(const std::vector<double>& observed, const std::vector<double>& expected,
                         int draws) {
  ASSERT_EQ(observed.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const double sigma = std::sqrt(std::max(expected[i] * (1 - expected[i]), 1e-12) / draws);
    EXPECT_NEAR(observed[i], expected[i], 5 * sigma + 1e-9) << "token " << i;
  }
}

std::vector<float> random_logits(std::mt19937_64& gen, int vocab) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = normal(gen);
  return logits;
}

TEST(Sampler, GreedyPicksTheLargestLogit) {
  Sampler sampler;
  std::mt19937_64 rng(0);
  const std::vector<float> logits = {0.1f, -2.0f, 5.0f, 4.9f};
  EXPECT_EQ(sampler.sample(logits, random_params(0.0f), rng).token_id, 2);
}

TEST(Sampler, GreedyTiesPickTheLowestIndex) {
  Sampler sampler;
  std::mt19937_64 rng(0);
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f};
  EXPECT_EQ(sampler.sample(logits, random_params(0.0f), rng).token_id, 1);
}

TEST(Sampler, GreedySkipsNaNAndRejectsAllNaN) {
  EXPECT_EQ(argmax_lowest_index(std::vector<float>{NAN, 1.0f, 2.0f, NAN}), 2);
  EXPECT_EQ(argmax_lowest_index(std::vector<float>{-INFINITY, -INFINITY}), 0);
  EXPECT_THROW(argmax_lowest_index(std::vector<float>{NAN, NAN}), Error);
}

TEST(Sampler, GreedyConsumesNoRandomness) {
  Sampler sampler;
  std::mt19937_64 rng(5), untouched(5);
  sampler.sample(std::vector<float>{1, 2, 3}, random_params(0.0f), rng);
  EXPECT_EQ(rng(), untouched());
}

TEST(Sampler, TopKOneEqualsGreedy) {
  Sampler sampler;
  std::mt19937_64 gen(11), rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits = random_logits(gen, 50);
    if (trial % 10 == 0) logits[7] = logits[30] = 100.0f;  // a tie: the lower id wins
    EXPECT_EQ(sampler.sample(logits, random_params(1.5f, 1), rng).token_id,
              argmax_lowest_index(logits));
  }
}

TEST(Sampler, TinyTopPEqualsGreedy) {
  Sampler sampler;
  std::mt19937_64 gen(12), rng(4);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> logits = random_logits(gen, 50);
    EXPECT_EQ(sampler.sample(logits, random_params(1.0f, 0, 1e-6f), rng).token_id,
              argmax_lowest_index(logits));
  }
}

TEST(Sampler, EmpiricalDistributionMatchesSoftmax) {
  Sampler sampler;
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
  const int draws = 200000;
  expect_distribution(empirical(sampler, logits, random_params(1.0f), draws), softmax(logits),
                      draws);
}

TEST(Sampler, TemperatureScalesTheLogits) {
  Sampler sampler;
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
  const int draws = 200000;
  expect_distribution(empirical(sampler, logits, random_params(0.6f), draws, 2),
                      softmax(logits, 0.6), draws);
  expect_distribution(empirical(sampler, logits, random_params(2.5f), draws, 3),
                      softmax(logits, 2.5), draws);
}

TEST(Sampler, TopKRenormalizesOverTheKMostLikely) {
  Sampler sampler;
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
  const int draws = 200000;
  const std::vector<double> full = softmax(logits);
  const double kept = full[4] + full[1];
  const std::vector<double> expected = {0, full[1] / kept, 0, 0, full[4] / kept};
  expect_distribution(empirical(sampler, logits, random_params(1.0f, 2), draws), expected, draws);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  Sampler sampler;
  const std::vector<float> logits = log_of({0.5, 0.3, 0.15, 0.05});
  const int draws = 200000;
  // Mass before the third token is 0.8 >= 0.7: it is dropped; 0.5 < 0.7 keeps the second.
  expect_distribution(empirical(sampler, logits, random_params(1.0f, 0, 0.7f), draws),
                      {0.625, 0.375, 0, 0}, draws);
  // 0.8 < 0.85: the third token is kept too.
  expect_distribution(empirical(sampler, logits, random_params(1.0f, 0, 0.85f), draws),
                      {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, draws);
}

TEST(Sampler, TopPAppliesToTheTopKRenormalizedDistribution) {
  Sampler sampler;
  const std::vector<float> logits = log_of({0.4, 0.3, 0.2, 0.1});
  const int draws = 200000;
  // After top-k 3 the probabilities are 4/9, 3/9, 2/9: the mass before the third token is
  // 7/9 >= 0.75, so it goes (over the original distribution, 0.7 < 0.75 would keep it).
  expect_distribution(empirical(sampler, logits, random_params(1.0f, 3, 0.75f), draws),
                      {4.0 / 7, 3.0 / 7, 0, 0}, draws);
}

TEST(Sampler, TopPUsesTheTemperatureScaledDistribution) {
  Sampler sampler;
  const std::vector<float> logits = log_of({0.5, 0.3, 0.15, 0.05});
  const int draws = 20000;
  // At temperature 0.5 the probabilities are ~ 0.68, 0.25, 0.06, 0.007, so top_p 0.6 keeps
  // only the first token (over the unscaled distribution it would keep two).
  expect_distribution(empirical(sampler, logits, random_params(0.5f, 0, 0.6f), draws), {1, 0, 0, 0},
                      draws);
}

TEST(Sampler, SeededStreamsDoNotDependOnBatchPosition) {
  std::mt19937_64 gen(99);
  const int vocab = 40, steps = 30;
  std::vector<std::vector<float>> logits_per_step;
  for (int s = 0; s < steps; ++s) logits_per_step.push_back(random_logits(gen, vocab));
  const SamplingParams params = random_params(1.0f, 10, 0.9f);

  // Sequence 0 sampled alone...
  std::vector<int> alone;
  {
    Sampler sampler;
    std::mt19937_64 rng(1234);
    for (int s = 0; s < steps; ++s)
      alone.push_back(sampler.sample(logits_per_step[s], params, rng).token_id);
  }
  // ...and as one row among others whose number and order change every step.
  Sampler sampler;
  std::vector<std::mt19937_64> rngs = {std::mt19937_64(1234), std::mt19937_64(7),
                                       std::mt19937_64(8)};
  std::vector<int> batched;
  for (int s = 0; s < steps; ++s) {
    std::vector<int> order = s % 3 == 0   ? std::vector<int>{0}
                             : s % 3 == 1 ? std::vector<int>{1, 0, 2}
                                          : std::vector<int>{2, 0};
    std::vector<Sampler::Row> rows;
    std::vector<float> flat;
    for (int seq : order) {
      rows.push_back({&params, &rngs[seq]});
      flat.insert(flat.end(), logits_per_step[s].begin(), logits_per_step[s].end());
    }
    std::vector<SampleResult> out;
    sampler.sample_rows(flat.data(), vocab, rows, out);
    ASSERT_EQ(out.size(), order.size());
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i] == 0) batched.push_back(out[i].token_id);
  }
  EXPECT_EQ(batched, alone);
}

TEST(Sampler, LogprobsEqualLogSoftmaxOfRawLogits) {
  Sampler sampler;
  std::mt19937_64 gen(5), rng(6);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits = random_logits(gen, 100);
    logits[3] = logits[60] = 9.0f;                         // a tie at the top
    SamplingParams params = random_params(0.7f, 5, 0.8f);  // ignored by logprobs
    params.logprobs = 4;
    const SampleResult result = sampler.sample(logits, params, rng);
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
    for (size_t i = 0; i < lp.top.size(); ++i) {
      EXPECT_NEAR(lp.top[i].logprob, std::log(probs[lp.top[i].token_id]), 1e-5);
      if (i > 0) {
        EXPECT_GE(lp.top[i - 1].logprob, lp.top[i].logprob);
      }
    }
    // Nothing outside the list beats its last entry.
    std::vector<double> sorted = probs;
    std::sort(sorted.rbegin(), sorted.rend());
    EXPECT_NEAR(lp.top[3].logprob, std::log(sorted[3]), 1e-5);
  }
}

TEST(Sampler, LogprobsZeroReportsOnlyTheSampledToken) {
  Sampler sampler;
  std::mt19937_64 rng(1);
  SamplingParams params = random_params(0.0f);
  params.logprobs = 0;
  const SampleResult result = sampler.sample(std::vector<float>{0.0f, 1.0f}, params, rng);
  ASSERT_TRUE(result.logprobs.has_value());
  EXPECT_TRUE(result.logprobs->top.empty());
  EXPECT_NEAR(result.logprobs->logprob, std::log(std::exp(1.0) / (1 + std::exp(1.0))), 1e-6);
  EXPECT_EQ(result.logprobs->rank, 1);
  params.logprobs.reset();
  EXPECT_FALSE(sampler.sample(std::vector<float>{0.0f, 1.0f}, params, rng).logprobs.has_value());
}

TEST(Sampler, NeverSamplesAMinusInfinityToken) {
  Sampler sampler;
  std::mt19937_64 rng(3);
  const std::vector<float> logits = {-INFINITY, 0.0f, -INFINITY, 0.0f};
  for (int i = 0; i < 1000; ++i) {
    const int token = sampler.sample(logits, random_params(1.0f), rng).token_id;
    EXPECT_TRUE(token == 1 || token == 3);
  }
}

TEST(Sampler, UniformIsInUnitInterval) {
  std::mt19937_64 rng(0);
  for (int i = 0; i < 10000; ++i) {
    const double u = uniform_01(rng);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

}  // namespace
}  // namespace nanovllm
