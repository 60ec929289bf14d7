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

// Row rules for the small-batch tests by kind: untruncated random, greedy, top-k with top-p,
// top-p alone; consecutive rows take consecutive kinds, so batches of 2 or more mix them.
RowRule small_batch_rule(std::mt19937_64& gen, int64_t kind) {
  const float temperatures[] = {0.3f, 0.6f, 1.0f, 1.7f};
  RowRule rule;
  rule.temperature = temperatures[gen() % 4];
  rule.seed = gen();
  rule.position = static_cast<int32_t>(gen() % 40000);
  switch (kind % 4) {
    case 1:
      rule.temperature = 0.0f;
      break;
    case 2:
      rule.top_k = 20;
      rule.top_p = 0.95f;
      break;
    case 3:
      rule.top_p = 0.9f;
      break;
    default:
      break;
  }
  return rule;
}

// Batches of a few rows split each row over many CTAs (large vocabularies) or keep one CTA per
// row (small ones); either way every row draws the CPU's token. Some batches put a tie at the top
// of row 0 (first and last token), make it all NaN, or give it an infinite logit.
TEST(CudaSampling, SmallBatchesAgreeWithTheCpu) {
  NVLLM_REQUIRE_CUDA();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(DType::kBF16);
  std::mt19937_64 gen(7);
  for (int64_t vocab :
       {int64_t{kQwenVocab}, int64_t{10007}, int64_t{4099}, int64_t{1001}, int64_t{3}}) {
    for (int64_t rows : {1, 2, 3, 7}) {
      const int batches = vocab > 5000 ? 12 : 24;
      std::vector<float> all_logits;
      std::vector<RowRule> all_rules;
      std::vector<int32_t> all_gpu, all_cpu;
      for (int b = 0; b < batches; ++b) {
        // Drop the first b % 5 rows so that row 0 takes every logit shape in turn.
        std::vector<float> logits = model_like_logits(gen, rows + b % 5, vocab);
        logits.erase(logits.begin(), logits.begin() + (b % 5) * vocab);
        if (b % 6 == 1 && vocab > 2) logits[1] = logits[vocab - 1] = 100.0f;
        if (b % 6 == 3) std::fill(logits.begin(), logits.begin() + vocab, kNaN);
        if (b % 6 == 5) logits[vocab - 1] = std::numeric_limits<float>::infinity();
        std::vector<RowRule> rules;
        for (int64_t r = 0; r < rows; ++r) rules.push_back(small_batch_rule(gen, b + r));
        const std::vector<int32_t> expected = test::backend_sample(*cpu, logits, vocab, rules);
        const std::vector<int32_t> actual = test::backend_sample(*gpu, logits, vocab, rules);
        if (b % 6 == 3) {
          EXPECT_EQ(actual[0], -1) << "vocab " << vocab << " batch " << b;
        }
        all_logits.insert(all_logits.end(), logits.begin(), logits.end());
        all_rules.insert(all_rules.end(), rules.begin(), rules.end());
        all_gpu.insert(all_gpu.end(), actual.begin(), actual.end());
        all_cpu.insert(all_cpu.end(), expected.begin(), expected.end());
      }
      expect_random_rows_agree(
          all_logits, vocab, all_rules, all_gpu, all_cpu,
          "vocab " + std::to_string(vocab) + " batches of " + std::to_string(rows));
    }
  }
}

// Greedy batches of a few rows over large vocabularies: the row's best key is folded from its
// chunks' keys, so it must be the CPU's token on every row.
TEST(CudaSampling, SmallGreedyBatchesAreIdenticalToTheCpu) {
  NVLLM_REQUIRE_CUDA();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(DType::kBF16);
  std::mt19937_64 gen(8);
  for (int64_t vocab : {int64_t{kQwenVocab}, int64_t{kQwenVocab + 3}, int64_t{10007}}) {
    for (int64_t rows : {1, 2, 3, 7}) {
      for (int b = 0; b < 6; ++b) {
        std::vector<float> logits = model_like_logits(gen, rows, vocab);
        // The best token at a chunk's edge or at the row's end, or a tie between the row's ends.
        const int64_t best = b == 0 ? vocab - 1 : b == 1 ? 0 : static_cast<int64_t>(gen() % vocab);
        logits[best] = 50.0f;
        if (b == 2) logits[vocab - 1] = 50.0f;
        std::vector<RowRule> rules(rows);
        for (RowRule& rule : rules) rule.temperature = 0.0f;
        EXPECT_EQ(test::backend_sample(*gpu, logits, vocab, rules),
                  test::backend_sample(*cpu, logits, vocab, rules))
            << "vocab " << vocab << " rows " << rows << " batch " << b;
      }
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

// The mean time of Backend::sample over the Qwen vocabulary under each row setting; printed.
void report_sample_times(Backend& gpu, int64_t rows, int iterations, std::mt19937_64& gen) {
  const std::vector<float> logits = model_like_logits(gen, rows, kQwenVocab);
  OwnedTensor logits_t = test::backend_tensor(gpu, DType::kF32, {rows, kQwenVocab}, logits);
  OwnedTensor out_t(DType::kI32, {rows}, gpu.device());
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
    OwnedTensor t_t = test::backend_tensor(gpu, DType::kF32, {rows}, temperature);
    OwnedTensor k_t = test::backend_tensor(gpu, DType::kI32, {rows}, top_k);
    OwnedTensor p_t = test::backend_tensor(gpu, DType::kF32, {rows}, top_p);
    OwnedTensor s_t = test::backend_tensor(gpu, DType::kI64, {rows}, seed);
    OwnedTensor n_t = test::backend_tensor(gpu, DType::kI32, {rows}, position);
    const SamplingTensors params{t_t.tensor, k_t.tensor, p_t.tensor, s_t.tensor, n_t.tensor};
    gpu.sample(logits_t.tensor, params, out_t.tensor);
    gpu.synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) gpu.sample(logits_t.tensor, params, out_t.tensor);
    gpu.synchronize();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        iterations;
    std::printf("sample %lld x %d %s: %.1f us\n", static_cast<long long>(rows), kQwenVocab, s.name,
                us);
  }
}

// Decode-step cost at the largest batch shapes; printed, not asserted.
TEST(CudaSampling, ReportsTheTimeOfA256RowStep) {
  NVLLM_REQUIRE_CUDA();
  auto gpu = make_cuda_backend(DType::kBF16);
  std::mt19937_64 gen(6);
  const int64_t rows = 256;
  report_sample_times(*gpu, rows, 20, gen);
  const std::vector<float> logits = model_like_logits(gen, rows, kQwenVocab);
  OwnedTensor logits_t = test::backend_tensor(*gpu, DType::kF32, {rows, kQwenVocab}, logits);
  OwnedTensor tokens_t =
      test::backend_tensor(*gpu, DType::kI32, {rows}, std::vector<int32_t>(rows, 5));
  OwnedTensor logprob_t(DType::kF32, {rows}, gpu->device());
  OwnedTensor rank_t(DType::kI32, {rows}, gpu->device());
  OwnedTensor top_ids_t(DType::kI32, {rows, 20}, gpu->device());
  OwnedTensor top_logprobs_t(DType::kF32, {rows, 20}, gpu->device());
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

// Decode-step cost at batch sizes 1 and 4 (rows split over many CTAs); printed, not asserted.
TEST(CudaSampling, ReportsTheTimeOfSmallBatchSteps) {
  NVLLM_REQUIRE_CUDA();
  auto gpu = make_cuda_backend(DType::kBF16);
  std::mt19937_64 gen(9);
  for (int64_t rows : {1, 4}) report_sample_times(*gpu, rows, 200, gen);
}

}  // namespace
}  // namespace nanovllm
