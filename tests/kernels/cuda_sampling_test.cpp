// Sampling and logprobs on the GPU against the CPU backend, through the Backend interface.
// Greedy rows and NaN rows must match exactly; random rows must draw the CPU's token on at least
// 99% of rows (the two sides' expf/logf may differ in the last bit, which moves a near-tie), and
// every GPU token must lie in the kept set of the rule. Logprobs agree within 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/backend.h"
#include "sampling_test_util.h"

namespace nanovllm {
namespace {

using test::RowRule;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kQwenVocab = 151936;
const DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

// Logits shaped like a model's: a normal bulk, a few tokens well above it; some rows with
// coarse values (many exact ties) or nearly flat.
std::vector<float> model_like_logits(std::mt19937_64& gen, int64_t rows, int64_t vocab) {
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (int64_t r = 0; r < rows; ++r) {
    const int kind = static_cast<int>(r % 5);
    std::normal_distribution<float> bulk(0.0f, kind == 4 ? 0.3f : 2.5f);
    float* row = logits.data() + r * vocab;
    for (int64_t v = 0; v < vocab; ++v) row[v] = bulk(gen);
    std::uniform_real_distribution<float> high(8.0f, 20.0f);
    for (int i = 0; i < 30; ++i) row[gen() % vocab] = high(gen);
    if (kind == 3) {
      for (int64_t v = 0; v < vocab; ++v) row[v] = std::round(row[v] * 4.0f) / 4.0f;
    }
  }
  return logits;
}

std::vector<RowRule> mixed_rules(std::mt19937_64& gen, int64_t rows) {
  const float temperatures[] = {0.3f, 0.6f, 1.0f, 1.7f};
  const int top_ks[] = {0, 0, 1, 20, 50, 1000, 5000};
  const float top_ps[] = {1.0f, 1.0f, 0.9f, 0.5f, 0.95f};
  std::vector<RowRule> rules;
  for (int64_t r = 0; r < rows; ++r) {
    RowRule rule;
    rule.temperature = temperatures[gen() % 4];
    rule.top_k = top_ks[gen() % 7];
    rule.top_p = top_ps[gen() % 5];
    rule.seed = gen();
    rule.position = static_cast<int32_t>(gen() % 40000);
    rules.push_back(rule);
  }
  return rules;
}

std::vector<float> row_of(const std::vector<float>& logits, int64_t vocab, int64_t r) {
  return std::vector<float>(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
}

// GPU tokens against CPU tokens: at least 99% equal, and any GPU token that differs is one the
// rule may draw.
void expect_random_rows_agree(const std::vector<float>& logits, int64_t vocab,
                              const std::vector<RowRule>& rules, const std::vector<int32_t>& gpu,
                              const std::vector<int32_t>& cpu, const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  int64_t equal = 0;
  for (size_t r = 0; r < gpu.size(); ++r) {
    if (gpu[r] == cpu[r]) {
      ++equal;
      continue;
    }
    const std::vector<float> row = row_of(logits, vocab, static_cast<int64_t>(r));
    ASSERT_FALSE(test::rule_is_greedy(row, rules[r])) << what << " row " << r;
    const std::vector<int32_t> kept = test::rule_kept_tokens(row, rules[r]);
    EXPECT_NE(std::find(kept.begin(), kept.end(), gpu[r]), kept.end())
        << what << " row " << r << ": GPU token " << gpu[r] << " is not in the kept set of "
        << kept.size() << " (T " << rules[r].temperature << " k " << rules[r].top_k << " p "
        << rules[r].top_p << ")";
  }
  EXPECT_GE(static_cast<double>(equal), 0.99 * static_cast<double>(gpu.size()))
      << what << ": " << equal << " of " << gpu.size() << " rows drew the CPU's token";
}

TEST(CudaSampling, GreedyIsIdenticalToTheCpu) {
  NVLLM_REQUIRE_CUDA();
  auto cpu = make_cpu_backend();
  std::mt19937_64 gen(1);
  for (DType dtype : kDTypes) {
    auto gpu = make_cuda_backend(dtype);
    for (int64_t vocab :
         {int64_t{kQwenVocab}, int64_t{2048}, int64_t{4099}, int64_t{37}, int64_t{1}}) {
      const int64_t rows = vocab > 5000 ? 40 : 300;
      std::vector<float> logits = model_like_logits(gen, rows, vocab);
      logits[0] = kNaN;  // row 0: a NaN; row 1: all NaN; row 2: a tie at the top
      std::fill(logits.begin() + vocab, logits.begin() + 2 * vocab, kNaN);
      if (vocab > 2) logits[2 * vocab + 1] = logits[2 * vocab + vocab - 1] = 100.0f;
      std::vector<RowRule> rules(rows);
      for (RowRule& rule : rules) rule.temperature = 0.0f;
      const std::vector<int32_t> expected = test::backend_sample(*cpu, logits, vocab, rules);
      EXPECT_EQ(expected[1], -1);
      EXPECT_EQ(test::backend_sample(*gpu, logits, vocab, rules), expected)
          << dtype_name(dtype) << " vocab " << vocab;
    }
  }
}

TEST(CudaSampling, NaNRowsGiveMinusOneAndNonFiniteMaximaAreGreedy) {
  NVLLM_REQUIRE_CUDA();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(DType::kBF16);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t vocab : {int64_t{kQwenVocab}, int64_t{6}}) {
    std::vector<float> logits(static_cast<size_t>(4 * vocab), kNaN);  // rows 0, 1: all NaN
    std::fill(logits.begin() + 2 * vocab, logits.begin() + 3 * vocab, -inf);
    logits[2 * vocab + 3] = kNaN;
    std::fill(logits.begin() + 3 * vocab, logits.begin() + 4 * vocab, 1.0f);
    logits[3 * vocab + 4] = inf;
    std::vector<RowRule> rules(4);
    rules[1].top_k = 3;
    rules[1].top_p = 0.5f;
    const std::vector<int32_t> tokens = test::backend_sample(*gpu, logits, vocab, rules);
    EXPECT_EQ(tokens, (std::vector<int32_t>{-1, -1, 0, 4}));
    EXPECT_EQ(tokens, test::backend_sample(*cpu, logits, vocab, rules));
  }
}

TEST(CudaSampling, RandomRowsAgreeWithTheCpu) {
  NVLLM_REQUIRE_CUDA();
  auto cpu = make_cpu_backend();
  std::mt19937_64 gen(2);
  struct Case {
    int64_t vocab, rows;
  };
  for (const Case& c : {Case{kQwenVocab, 300}, Case{kQwenVocab, 1}, Case{kQwenVocab, 7},
                        Case{2048, 300}, Case{4099, 129}, Case{37, 300}, Case{1, 5}}) {
    const std::vector<float> logits = model_like_logits(gen, c.rows, c.vocab);
    const std::vector<RowRule> rules = mixed_rules(gen, c.rows);
    const std::vector<int32_t> expected = test::backend_sample(*cpu, logits, c.vocab, rules);
    auto gpu = make_cuda_backend(DType::kBF16);
    expect_random_rows_agree(
        logits, c.vocab, rules, test::backend_sample(*gpu, logits, c.vocab, rules), expected,
        "vocab " + std::to_string(c.vocab) + " rows " + std::to_string(c.rows));
  }
}

// Each truncation on its own, at every temperature, over the Qwen vocabulary: kept sets of a few
// tokens (copied to shared memory) and of tens of thousands (selected over the whole row).
TEST(CudaSampling, EachTruncationAgreesWithTheCpu) {
  NVLLM_REQUIRE_CUDA();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(DType::kBF16);
  std::mt19937_64 gen(3);
  const int64_t rows = 60;
  const std::vector<float> logits = model_like_logits(gen, rows, kQwenVocab);
  struct Truncation {
    int top_k;
    float top_p;
  };
  for (const Truncation& t :
       {Truncation{0, 1.0f}, Truncation{2, 1.0f}, Truncation{20, 1.0f}, Truncation{4096, 1.0f},
        Truncation{4097, 1.0f}, Truncation{100000, 1.0f}, Truncation{0, 0.1f}, Truncation{0, 0.9f},
        Truncation{0, 0.999f}, Truncation{20, 0.95f}, Truncation{5000, 0.9f}}) {
    for (float temperature : {0.3f, 1.0f, 3.0f}) {
      std::vector<RowRule> rules(rows);
      for (RowRule& rule : rules) {
        rule.temperature = temperature;
        rule.top_k = t.top_k;
        rule.top_p = t.top_p;
        rule.seed = gen();
        rule.position = static_cast<int32_t>(gen() % 4096);
      }
      expect_random_rows_agree(logits, kQwenVocab, rules,
                               test::backend_sample(*gpu, logits, kQwenVocab, rules),
                               test::backend_sample(*cpu, logits, kQwenVocab, rules),
                               "top_k " + std::to_string(t.top_k) + " top_p " +
                                   std::to_string(t.top_p) + " T " + std::to_string(temperature));
    }
  }
}

TEST(CudaSampling, RowsDoNotDependOnTheRestOfTheBatch) {
  NVLLM_REQUIRE_CUDA();
  std::mt19937_64 gen(4);
  const int64_t vocab = 4099, rows = 50;
  const std::vector<float> logits = model_like_logits(gen, rows, vocab);
  const std::vector<RowRule> rules = mixed_rules(gen, rows);
  for (DType dtype : kDTypes) {
    auto gpu = make_cuda_backend(dtype);
    const std::vector<int32_t> batched = test::backend_sample(*gpu, logits, vocab, rules);
    for (int64_t r = 0; r < rows; r += 7) {
      EXPECT_EQ(test::backend_sample(*gpu, row_of(logits, vocab, r), vocab, {rules[r]})[0],
                batched[r])
          << "row " << r;
    }
  }
}

TEST(CudaLogprobs, AgreeWithTheCpu) {
  NVLLM_REQUIRE_CUDA();
  auto cpu = make_cpu_backend();
  std::mt19937_64 gen(5);
  for (DType dtype : kDTypes) {
    auto gpu = make_cuda_backend(dtype);
    for (int64_t vocab : {int64_t{kQwenVocab}, int64_t{2048}, int64_t{37}, int64_t{4099}}) {
      const int64_t rows = vocab > 5000 ? 33 : 200;
      std::vector<float> logits(static_cast<size_t>(rows * vocab));
      std::normal_distribution<float> normal(0.0f, 3.0f);
      for (float& x : logits) x = normal(gen);  // continuous: no ties
      std::vector<int32_t> tokens;
      for (int64_t r = 0; r < rows; ++r) tokens.push_back(static_cast<int32_t>(gen() % vocab));
      for (int num_top : {0, 1, 5, 20}) {
        const test::BackendLogprobs expected =
            test::backend_logprobs(*cpu, logits, vocab, tokens, num_top);
        const test::BackendLogprobs actual =
            test::backend_logprobs(*gpu, logits, vocab, tokens, num_top);
        const std::string what = std::string(dtype_name(dtype)) + " vocab " +
                                 std::to_string(vocab) + " top " + std::to_string(num_top);
        for (int64_t r = 0; r < rows; ++r) {
          EXPECT_NEAR(actual.logprob[r], expected.logprob[r], 1e-4) << what << " row " << r;
          EXPECT_EQ(actual.rank[r], expected.rank[r]) << what << " row " << r;
        }
        EXPECT_EQ(actual.top_ids, expected.top_ids) << what;
        for (size_t i = 0; i < expected.top_logprobs.size(); ++i) {
          EXPECT_NEAR(actual.top_logprobs[i], expected.top_logprobs[i], 1e-4) << what << " " << i;
        }
      }
    }
  }
}

// Decode-step cost at the largest batch shapes; printed, not asserted.
TEST(CudaSampling, ReportsTheTimeOfA256RowStep) {
  NVLLM_REQUIRE_CUDA();
  auto gpu = make_cuda_backend(DType::kBF16);
  std::mt19937_64 gen(6);
  const int64_t rows = 256;
  const std::vector<float> logits = model_like_logits(gen, rows, kQwenVocab);
  OwnedTensor logits_t = test::backend_tensor(*gpu, DType::kF32, {rows, kQwenVocab}, logits);
  OwnedTensor out_t(DType::kI32, {rows}, gpu->device());
  OwnedTensor tokens_t =
      test::backend_tensor(*gpu, DType::kI32, {rows}, std::vector<int32_t>(rows, 5));
  OwnedTensor logprob_t(DType::kF32, {rows}, gpu->device());
  OwnedTensor rank_t(DType::kI32, {rows}, gpu->device());
  OwnedTensor top_ids_t(DType::kI32, {rows, 20}, gpu->device());
  OwnedTensor top_logprobs_t(DType::kF32, {rows, 20}, gpu->device());
  struct Setting {
    const char* name;
    float temperature;
    int top_k;
    float top_p;
  };
  for (const Setting& s :
       {Setting{"greedy", 0.0f, 0, 1.0f}, Setting{"T=0.6", 0.6f, 0, 1.0f},
        Setting{"T=1", 1.0f, 0, 1.0f}, Setting{"top_k=20", 0.6f, 20, 1.0f},
        Setting{"top_k=20 top_p=0.95", 0.6f, 20, 0.95f}, Setting{"top_p=0.9", 1.0f, 0, 0.9f}}) {
    std::vector<float> temperature(rows, s.temperature), top_p(rows, s.top_p);
    std::vector<int32_t> top_k(rows, s.top_k), position(rows, 77);
    std::vector<int64_t> seed(rows);
    for (int64_t& x : seed) x = static_cast<int64_t>(gen());
    OwnedTensor t_t = test::backend_tensor(*gpu, DType::kF32, {rows}, temperature);
    OwnedTensor k_t = test::backend_tensor(*gpu, DType::kI32, {rows}, top_k);
    OwnedTensor p_t = test::backend_tensor(*gpu, DType::kF32, {rows}, top_p);
    OwnedTensor s_t = test::backend_tensor(*gpu, DType::kI64, {rows}, seed);
    OwnedTensor n_t = test::backend_tensor(*gpu, DType::kI32, {rows}, position);
    const SamplingTensors params{t_t.tensor, k_t.tensor, p_t.tensor, s_t.tensor, n_t.tensor};
    gpu->sample(logits_t.tensor, params, out_t.tensor);
    gpu->synchronize();
    const int iterations = 20;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) gpu->sample(logits_t.tensor, params, out_t.tensor);
    gpu->synchronize();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        iterations;
    std::printf("sample 256 x %d %s: %.1f us\n", kQwenVocab, s.name, us);
  }
  const LogprobsTensors out{logprob_t.tensor, rank_t.tensor, top_ids_t.tensor,
                            top_logprobs_t.tensor};
  gpu->compute_logprobs(logits_t.tensor, tokens_t.tensor, 20, out);
  gpu->synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) gpu->compute_logprobs(logits_t.tensor, tokens_t.tensor, 20, out);
  gpu->synchronize();
  std::printf(
      "logprobs 256 x %d top 20: %.1f us\n", kQwenVocab,
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
          20);
}

}  // namespace
}  // namespace nanovllm
