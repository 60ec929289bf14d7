// The sampling rule (kernels/sampling_math.h) and its CPU implementation: Philox known answers,
// greedy and its NaN cases, agreement with the rule written out by brute force, empirical
// distributions against softmax (and its top-k / top-p truncations) computed in double, exact
// kept sets at the boundaries, per-(seed, position) determinism, batch independence, logprobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/sampling_math.h"
#include "sampling_test_util.h"

namespace nanovllm {
namespace {

using test::RowRule;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

int32_t sample(const std::vector<float>& logits, const RowRule& rule) {
  std::vector<uint64_t> scratch;
  const cpu::RowSamplingParams params{rule.temperature, rule.top_k, rule.top_p, rule.seed,
                                      rule.position};
  return cpu::sample_row(logits.data(), static_cast<int64_t>(logits.size()), params, scratch);
}

RowRule greedy_rule() {
  RowRule rule;
  rule.temperature = 0.0f;
  return rule;
}

RowRule random_rule(float temperature, int top_k = 0, float top_p = 1.0f, uint64_t seed = 1) {
  RowRule rule;
  rule.temperature = temperature;
  rule.top_k = top_k;
  rule.top_p = top_p;
  rule.seed = seed;
  return rule;
}

std::vector<float> random_logits(std::mt19937_64& gen, int vocab, float sigma = 2.0f) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = normal(gen);
  return logits;
}

// Frequencies of the tokens drawn at positions 0 .. draws - 1.
std::vector<double> empirical(const std::vector<float>& logits, RowRule rule, int draws) {
  std::vector<double> counts(logits.size(), 0.0);
  for (int n = 0; n < draws; ++n) {
    rule.position = n;
    counts.at(sample(logits, rule)) += 1;
  }
  for (double& c : counts) c /= draws;
  return counts;
}

// softmax(l / T) restricted to the top_k most likely tokens, then to those the top-p rule keeps
// (mass before a token below top_p), renormalized; in double.
std::vector<double> truncated_softmax(const std::vector<float>& logits, double temperature,
                                      int top_k = 0, double top_p = 1.0) {
  const std::vector<int32_t> order = test::rule_order(logits);
  const size_t vocab = logits.size();
  const size_t k = top_k > 0 && static_cast<size_t>(top_k) < vocab ? top_k : vocab;
  std::vector<double> weight(vocab, 0.0);
  double total = 0.0;
  for (size_t i = 0; i < k; ++i) {
    weight[order[i]] = std::exp((logits[order[i]] - logits[order[0]]) / temperature);
    total += weight[order[i]];
  }
  double before = 0.0;
  for (size_t i = 0; i < k; ++i) {
    if (i > 0 && before >= top_p * total) weight[order[i]] = 0.0;
    before += std::exp((logits[order[i]] - logits[order[0]]) / temperature);
  }
  double kept = 0.0;
  for (double w : weight) kept += w;
  for (double& w : weight) w /= kept;
  return weight;
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

// The distinct tokens drawn over `draws` positions.
std::set<int32_t> drawn_tokens(const std::vector<float>& logits, RowRule rule, int draws) {
  std::set<int32_t> tokens;
  for (int n = 0; n < draws; ++n) {
    rule.position = n;
    tokens.insert(sample(logits, rule));
  }
  return tokens;
}

TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Case {
    uint32_t counter[4], key[2], expected[4];
  };
  const Case cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Case& c : cases) {
    const sampling::Philox4 out = sampling::philox4x32_10(c.counter[0], c.counter[1], c.counter[2],
                                                          c.counter[3], c.key[0], c.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.x[i], c.expected[i]) << "word " << i;
  }
}

TEST(SamplingMath, RandomWordsOfFourTokensShareOneBlock) {
  const uint64_t seed = 0x0123456789abcdefull;
  for (int32_t token = 0; token < 12; ++token) {
    const sampling::Philox4 block = sampling::random_block(seed, 17, token / 4);
    EXPECT_EQ(sampling::random_word(seed, 17, token), block.x[token % 4]);
  }
  // Every bit of the seed and the position matter.
  EXPECT_NE(sampling::random_word(seed, 17, 5), sampling::random_word(seed ^ (1ull << 63), 17, 5));
  EXPECT_NE(sampling::random_word(seed, 17, 5), sampling::random_word(seed ^ 1ull, 17, 5));
  EXPECT_NE(sampling::random_word(seed, 17, 5), sampling::random_word(seed, 18, 5));
}

TEST(SamplingMath, UniformIsStrictlyInsideTheUnitInterval) {
  EXPECT_EQ(sampling::uniform_from_word(0u), 0x1p-24f);
  EXPECT_EQ(sampling::uniform_from_word(0xffffffffu), 1.0f - 0x1p-24f);
  std::mt19937 gen(3);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t word = gen();
    const float u = sampling::uniform_from_word(word);
    EXPECT_EQ(static_cast<double>(u), ((word >> 9) + 0.5) / 8388608.0);  // exact
  }
  for (uint32_t word : {0u, 0xffffffffu, 0x80000000u}) {
    const float g = sampling::gumbel_from_word(word);
    EXPECT_TRUE(std::isfinite(g));
    EXPECT_GT(g, -2.82f);
    EXPECT_LT(g, 16.64f);
  }
}

TEST(SamplingMath, RankKeyOrdersByLogitThenLowestId) {
  const std::vector<float> ascending = {-kInf, -1e30f, -1.0f, -1e-30f, 0.0f, 1e-30f, 1.0f, kInf};
  for (size_t i = 0; i + 1 < ascending.size(); ++i) {
    EXPECT_LT(sampling::rank_key(ascending[i], 0), sampling::rank_key(ascending[i + 1], 9));
  }
  EXPECT_LT(sampling::rank_key(kNaN, 0), sampling::rank_key(-kInf, 5));
  EXPECT_EQ(sampling::rank_key(-0.0f, 3), sampling::rank_key(0.0f, 3));
  EXPECT_GT(sampling::rank_key(2.0f, 3), sampling::rank_key(2.0f, 4));  // lower id first
  EXPECT_GT(sampling::rank_key(kNaN, 1 << 30), 0u);
  for (float x : ascending) {
    const uint64_t key = sampling::rank_key(x, 77);
    EXPECT_EQ(sampling::token_of_key(key), 77);
    EXPECT_EQ(sampling::logit_of_key(key), x);
  }
  EXPECT_TRUE(std::isnan(sampling::logit_of_key(sampling::rank_key(kNaN, 2))));
  EXPECT_TRUE(sampling::all_nan(sampling::rank_key(kNaN, 0)));
  EXPECT_FALSE(sampling::all_nan(sampling::rank_key(-kInf, 0)));
}

TEST(CpuSampling, GreedyPicksTheFirstTokenInOrder) {
  EXPECT_EQ(sample({0.1f, -2.0f, 5.0f, 4.9f}, greedy_rule()), 2);
  EXPECT_EQ(sample({1.0f, 3.0f, 3.0f, 2.0f, 3.0f}, greedy_rule()), 1);
  EXPECT_EQ(sample({kNaN, 1.0f, 2.0f, kNaN}, greedy_rule()), 2);
  EXPECT_EQ(sample({kNaN, -kInf, kNaN}, greedy_rule()), 1);
  EXPECT_EQ(sample({-kInf, -kInf}, greedy_rule()), 0);
  EXPECT_EQ(sample({-0.0f, 0.0f}, greedy_rule()), 0);
  EXPECT_EQ(sample({kNaN}, greedy_rule()), -1);
  EXPECT_EQ(sample({kNaN, kNaN, kNaN}, greedy_rule()), -1);
  EXPECT_EQ(sample({kNaN, kNaN, kNaN}, random_rule(1.0f, 2, 0.5f)), -1);
  EXPECT_EQ(sample({0.0f, 1.0f}, random_rule(0.99e-5f)), 1);  // below kGreedyTemperature
}

TEST(CpuSampling, NonFiniteLargestLogitSamplesGreedily) {
  EXPECT_EQ(sample({1.0f, kInf, 3.0f, kInf}, random_rule(1.0f)), 1);
  EXPECT_EQ(sample({-kInf, kNaN, -kInf}, random_rule(1.0f, 0, 0.5f)), 0);
}

TEST(CpuSampling, TopKOneAndTinyTopPEqualGreedy) {
  std::mt19937_64 gen(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<float> logits = random_logits(gen, 50);
    if (trial % 10 == 0) logits[7] = logits[30] = 100.0f;  // a tie: the lower id wins
    const int32_t greedy = sample(logits, greedy_rule());
    RowRule top_k_one = random_rule(1.5f, 1, 1.0f, gen());
    top_k_one.position = trial;
    EXPECT_EQ(sample(logits, top_k_one), greedy);
    RowRule tiny_top_p = random_rule(1.0f, 0, 1e-7f, gen());
    tiny_top_p.position = trial;
    EXPECT_EQ(sample(logits, tiny_top_p), greedy);
  }
}

TEST(CpuSampling, MatchesTheRuleWrittenOutByBruteForce) {
  std::mt19937_64 gen(12);
  int random_rows = 0;
  for (int vocab : {1, 2, 3, 7, 64, 1000, 5003}) {
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<float> logits = random_logits(gen, vocab, trial % 2 ? 1.0f : 6.0f);
      if (trial % 5 == 1) {  // ties, NaN and -inf
        for (int i = 0; i < vocab / 3; ++i) logits[gen() % vocab] = logits[gen() % vocab];
        logits[gen() % vocab] = kNaN;
        logits[gen() % vocab] = -kInf;
      }
      if (trial % 7 == 3) {  // coarse values: many exact ties
        for (float& x : logits) x = std::round(x);
      }
      RowRule rule;
      rule.temperature = std::array<float, 5>{0.0f, 0.3f, 0.7f, 1.0f, 2.5f}[trial % 5];
      rule.top_k = std::array<int, 6>{0, 1, 2, 5, 40, vocab + 3}[(trial / 5) % 6];
      rule.top_p = std::array<float, 5>{1.0f, 0.05f, 0.5f, 0.9f, 0.999f}[(trial / 3) % 5];
      rule.seed = gen();
      rule.position = static_cast<int32_t>(gen() % 100000);
      random_rows += test::rule_is_greedy(logits, rule) ? 0 : 1;
      EXPECT_EQ(sample(logits, rule), test::rule_token(logits, rule))
          << "vocab " << vocab << " trial " << trial << " T " << rule.temperature << " k "
          << rule.top_k << " p " << rule.top_p;
    }
  }
  EXPECT_GT(random_rows, 200);
}

TEST(CpuSampling, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, -kInf};
  const int draws = 100000;
  for (float temperature : {1.0f, 0.6f, 2.5f}) {
    expect_distribution(empirical(logits, random_rule(temperature, 0, 1.0f, 5), draws),
                        truncated_softmax(logits, temperature), draws);
  }
}

TEST(CpuSampling, TopKAndTopPRenormalizeOverTheKeptTokens) {
  const int draws = 100000;
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 1.5f};
  for (const RowRule& rule :
       {random_rule(1.0f, 2), random_rule(0.8f, 4), random_rule(1.0f, 0, 0.7f),
        random_rule(1.3f, 0, 0.9f), random_rule(1.0f, 4, 0.8f), random_rule(0.5f, 3, 0.95f)}) {
    expect_distribution(empirical(logits, rule, draws),
                        truncated_softmax(logits, rule.temperature, rule.top_k, rule.top_p), draws);
  }
}

TEST(CpuSampling, TopPUsesTheTopKSetAndTheTemperature) {
  // Probabilities 0.4 0.3 0.2 0.1; after top-k 3 they are 4/9 3/9 2/9 and the mass before the
  // third token, 7/9, reaches top_p 0.75: it goes (over all four, 0.7 < 0.75 would keep it).
  const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f),
                                     std::log(0.1f)};
  EXPECT_EQ(drawn_tokens(logits, random_rule(1.0f, 3, 0.75f), 2000), (std::set<int32_t>{0, 1}));
  EXPECT_EQ(drawn_tokens(logits, random_rule(1.0f, 0, 0.75f), 2000), (std::set<int32_t>{0, 1, 2}));
  // At temperature 0.5 the probabilities are ~0.53, 0.30, 0.13, 0.03: top_p 0.5 keeps one token.
  EXPECT_EQ(drawn_tokens(logits, random_rule(0.5f, 0, 0.5f), 500), (std::set<int32_t>{0}));
}

TEST(CpuSampling, KeptSetsAtTheBoundariesAreExact) {
  // Equal logits weigh exactly 2^40 each, so the top-p cut is exact.
  const std::vector<float> flat = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  const int draws = 3000;
  EXPECT_EQ(drawn_tokens(flat, random_rule(1.0f, 3), draws), (std::set<int32_t>{0, 1, 2}));
  // 6 tokens, top_p 0.5: the threshold is 3 * 2^40, exactly the q before the fourth token.
  EXPECT_EQ(drawn_tokens(flat, random_rule(1.0f, 0, 0.5f), draws), (std::set<int32_t>{0, 1, 2}));
  // Just above it the fourth token stays.
  EXPECT_EQ(drawn_tokens(flat, random_rule(1.0f, 0, 0.50001f), draws),
            (std::set<int32_t>{0, 1, 2, 3}));
  // Top-k 4 first: the threshold is 2 * 2^40.
  EXPECT_EQ(drawn_tokens(flat, random_rule(1.0f, 4, 0.5f), draws), (std::set<int32_t>{0, 1}));
  // Ties at the k-th logit keep the lowest ids; -inf and NaN tokens weigh nothing.
  const std::vector<float> ties = {3.0f, 5.0f, 1.0f, 5.0f, 5.0f, -kInf, kNaN, 5.0f};
  EXPECT_EQ(drawn_tokens(ties, random_rule(1.0f, 2), draws), (std::set<int32_t>{1, 3}));
  EXPECT_EQ(drawn_tokens(ties, random_rule(1.0f, 3), draws), (std::set<int32_t>{1, 3, 4}));
  EXPECT_EQ(drawn_tokens(ties, random_rule(1.0f, 0, 0.6f), draws), (std::set<int32_t>{1, 3, 4}));
  const std::set<int32_t> untruncated = drawn_tokens(ties, random_rule(1.0f, 7), draws);
  EXPECT_EQ(untruncated.count(5), 0u);
  EXPECT_EQ(untruncated.count(6), 0u);
}

TEST(CpuSampling, SameSeedAndPositionGiveTheSameToken) {
  std::mt19937_64 gen(13);
  const std::vector<float> logits = random_logits(gen, 1000, 0.5f);
  std::set<int32_t> tokens;
  for (int n = 0; n < 200; ++n) {
    RowRule rule = random_rule(1.0f, 0, 1.0f, 42);
    rule.position = n;
    const int32_t token = sample(logits, rule);
    EXPECT_EQ(sample(logits, rule), token);
    tokens.insert(token);
    rule.seed = 43;
    tokens.insert(sample(logits, rule));
  }
  EXPECT_GT(tokens.size(), 200u);  // positions and seeds draw different tokens
}

TEST(CpuSampling, RowsDoNotDependOnTheRestOfTheBatch) {
  std::mt19937_64 gen(14);
  const int vocab = 301;
  std::vector<std::vector<float>> logits;
  std::vector<RowRule> rules;
  for (int i = 0; i < 6; ++i) {
    logits.push_back(random_logits(gen, vocab));
    RowRule rule = random_rule(0.8f + 0.1f * i, i % 3 == 0 ? 0 : 20, i % 2 ? 0.9f : 1.0f, gen());
    rule.position = 100 + i;
    rules.push_back(rule);
  }
  rules[2].temperature = 0.0f;
  auto backend = make_cpu_backend(2);
  std::vector<int32_t> alone;
  for (int i = 0; i < 6; ++i)
    alone.push_back(test::backend_sample(*backend, logits[i], vocab, {rules[i]})[0]);
  for (const std::vector<int>& order :
       {std::vector<int>{0, 1, 2, 3, 4, 5}, std::vector<int>{5, 3, 1}, std::vector<int>{4, 4, 0}}) {
    std::vector<float> flat;
    std::vector<RowRule> batch_rules;
    for (int i : order) {
      flat.insert(flat.end(), logits[i].begin(), logits[i].end());
      batch_rules.push_back(rules[i]);
    }
    const std::vector<int32_t> tokens = test::backend_sample(*backend, flat, vocab, batch_rules);
    for (size_t r = 0; r < order.size(); ++r) EXPECT_EQ(tokens[r], alone[order[r]]);
  }
  for (int i = 0; i < 6; ++i) EXPECT_EQ(alone[i], test::rule_token(logits[i], rules[i]));
}

TEST(CpuSampling, BackendChecksItsArguments) {
  auto backend = make_cpu_backend(1);
  OwnedTensor logits(DType::kF32, {2, 5});
  OwnedTensor f32(DType::kF32, {2});
  OwnedTensor i32(DType::kI32, {2});
  OwnedTensor i64(DType::kI64, {2});
  OwnedTensor out(DType::kI32, {2});
  OwnedTensor short_out(DType::kI32, {1});
  const SamplingTensors good{f32.tensor, i32.tensor, f32.tensor, i64.tensor, i32.tensor};
  const SamplingTensors wrong_seed{f32.tensor, i32.tensor, f32.tensor, i32.tensor, i32.tensor};
  EXPECT_THROW(backend->sample(logits.tensor, good, short_out.tensor), Error);
  EXPECT_THROW(backend->sample(logits.tensor, wrong_seed, out.tensor), Error);
  OwnedTensor empty_vocab(DType::kF32, {2, 0});
  EXPECT_THROW(backend->sample(empty_vocab.tensor, good, out.tensor), Error);
  OwnedTensor logprob(DType::kF32, {2});
  OwnedTensor top_ids(DType::kI32, {2, 6});
  OwnedTensor top_logprobs(DType::kF32, {2, 6});
  const LogprobsTensors lp{logprob.tensor, i32.tensor, top_ids.tensor, top_logprobs.tensor};
  EXPECT_THROW(backend->compute_logprobs(logits.tensor, i32.tensor, 6, lp), Error);  // > vocab
  EXPECT_THROW(backend->compute_logprobs(logits.tensor, i32.tensor, -1, lp), Error);
}

TEST(CpuLogprobs, MatchLogSoftmaxRankAndTop) {
  std::mt19937_64 gen(15);
  auto backend = make_cpu_backend(2);
  for (int vocab : {1, 5, 100, 4099}) {
    const int rows = 7;
    std::vector<float> logits = random_logits(gen, rows * vocab, 3.0f);
    if (vocab >= 100) {
      logits[3] = logits[60] = 30.0f;  // a tie at the top of row 0
      logits[vocab + 9] = kNaN;        // NaN and -inf in row 1
      logits[vocab + 10] = -kInf;
    }
    std::vector<int32_t> tokens;
    for (int r = 0; r < rows; ++r) tokens.push_back(static_cast<int32_t>(gen() % vocab));
    if (vocab >= 100) {
      tokens[0] = 60;
      tokens[1] = 11;  // not the NaN or -inf token
    }
    for (int num_top : {0, 1, std::min(vocab, 4), std::min(vocab, 20)}) {
      const test::BackendLogprobs out =
          test::backend_logprobs(*backend, logits, vocab, tokens, num_top);
      for (int r = 0; r < rows; ++r) {
        const float* row = logits.data() + static_cast<size_t>(r) * vocab;
        const std::vector<double> expected = test::reference_log_softmax(row, vocab);
        EXPECT_NEAR(out.logprob[r], expected[tokens[r]], 1e-5) << "row " << r;
        int rank = 1;
        for (int v = 0; v < vocab; ++v) rank += row[v] > row[tokens[r]] ? 1 : 0;
        EXPECT_EQ(out.rank[r], rank);
        const std::vector<int32_t> order = test::rule_order(std::vector<float>(row, row + vocab));
        for (int i = 0; i < num_top; ++i) {
          EXPECT_EQ(out.top_ids[r * num_top + i], order[i]) << "row " << r << " entry " << i;
          EXPECT_NEAR(out.top_logprobs[r * num_top + i], expected[order[i]], 1e-5);
        }
      }
      if (vocab >= 100 && num_top >= 2) {
        EXPECT_EQ(out.top_ids[0], 3);
        EXPECT_EQ(out.top_ids[1], 60);
        EXPECT_EQ(out.rank[0], 1);  // tied with token 3: nothing strictly larger
      }
    }
  }
}

TEST(CpuLogprobs, TokenOutsideTheVocabularyHasNoLogprob) {
  auto backend = make_cpu_backend(1);
  const test::BackendLogprobs out =
      test::backend_logprobs(*backend, {0.0f, 1.0f, 0.0f, 1.0f}, 2, {-1, 2}, 1);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(std::isnan(out.logprob[r]));
    EXPECT_EQ(out.rank[r], 0);
    EXPECT_EQ(out.top_ids[r], 1);
  }
}

}  // namespace
}  // namespace nanovllm
