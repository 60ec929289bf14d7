// PythonRandom and the benchmark workloads against CPython 3.11's `random` module. The expected
// values were printed once with python3, e.g.
//   python3 -c "import random; random.seed(0); print([random.randint(0, 10000) for _ in
//   range(12)])"
// (each test names the calls that made its values).
#include "nanovllm/python_random.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/check.h"
#include "nanovllm/bench_workload.h"

namespace nanovllm {
namespace {

TEST(PythonRandom, GetrandbitsMatchesPythonAfterSeedZero) {
  // seed(0); [getrandbits(32) for _ in range(6)]
  PythonRandom random(0);
  const std::vector<uint64_t> expected = {3626764237, 1654615998, 3255389356,
                                          3823568514, 1806341205, 173879092};
  for (uint64_t value : expected) EXPECT_EQ(random.getrandbits(32), value);
}

TEST(PythonRandom, RandintMatchesPythonAfterSeedZero) {
  // seed(0); [randint(0, 10000) for _ in range(12)]
  PythonRandom random(0);
  const std::vector<int64_t> expected = {6311, 6890, 663,  4242, 8376, 7961,
                                         6634, 4969, 7808, 5866, 9558, 3578};
  for (int64_t value : expected) EXPECT_EQ(random.randint(0, 10000), value);
}

TEST(PythonRandom, RandintMatchesPythonForAnotherSeedAndRange) {
  // seed(12345); [randint(100, 1024) for _ in range(8)]
  PythonRandom random(12345);
  const std::vector<int64_t> expected = {526, 850, 110, 939, 945, 922, 405, 975};
  for (int64_t value : expected) EXPECT_EQ(random.randint(100, 1024), value);
}

TEST(PythonRandom, SeedsWiderThan32BitsUseTwoKeyWords) {
  // seed(2**32 + 7); [getrandbits(k) for k in (1, 7, 31, 32, 33, 64)]
  PythonRandom random((uint64_t{1} << 32) + 7);
  EXPECT_EQ(random.getrandbits(1), 0u);
  EXPECT_EQ(random.getrandbits(7), 97u);
  EXPECT_EQ(random.getrandbits(31), 770089724u);
  EXPECT_EQ(random.getrandbits(32), 1473205320u);
  EXPECT_EQ(random.getrandbits(33), 3432680139u);
  EXPECT_EQ(random.getrandbits(64), 7070717003246987606u);
}

TEST(PythonRandom, RandintOverRangesWiderThan32Bits) {
  // seed(3); [randint(-5, 2**40) for _ in range(4)]
  PythonRandom random(3);
  const std::vector<int64_t> expected = {285805288261, 1041975902456, 1034389053348, 421913238830};
  for (int64_t value : expected) EXPECT_EQ(random.randint(-5, int64_t{1} << 40), value);
}

TEST(PythonRandom, RandintOfOneValueStillDrawsLikePython) {
  // randint(a, a) draws getrandbits(1) (n.bit_length() of 1) until it is 0; after seed(0) the
  // bits are 1, 0, so two words are used. seed(0); randint(7, 7); getrandbits(32)
  PythonRandom random(0);
  EXPECT_EQ(random.randint(7, 7), 7);
  EXPECT_EQ(random.getrandbits(32), 3255389356u);
}

TEST(PythonRandom, BadArgumentsThrow) {
  PythonRandom random(0);
  EXPECT_THROW(random.randint(2, 1), Error);
  EXPECT_THROW(random.getrandbits(0), Error);
  EXPECT_THROW(random.getrandbits(65), Error);
}

TEST(BenchWorkload, BenchPyWorkloadTotals) {
  // bench.py from seed 0: 256 prompts of [100, 1024] tokens, max_tokens in [100, 1024].
  const BenchWorkload workload = make_bench_workload(BenchWorkloadSpec{});
  ASSERT_EQ(workload.prompts.size(), 256u);
  ASSERT_EQ(workload.max_tokens.size(), 256u);
  EXPECT_EQ(workload.num_prompt_tokens(), 142827);
  EXPECT_EQ(workload.num_output_tokens(), 133966);
}

TEST(BenchWorkload, ShrunkenWorkloadKeepsBenchPyOrder) {
  // seed(0); p = [[randint(0, 2047) for _ in range(randint(10, 40))] for _ in range(4)];
  // m = [randint(4, 12) for _ in range(4)]
  BenchWorkloadSpec spec;
  spec.num_seqs = 4;
  spec.min_input_len = 10;
  spec.max_input_len = 40;
  spec.min_output_len = 4;
  spec.max_output_len = 12;
  spec.max_token_id = 2047;
  const BenchWorkload workload = make_bench_workload(spec);
  std::vector<size_t> lengths;
  for (const std::vector<int>& prompt : workload.prompts) lengths.push_back(prompt.size());
  EXPECT_EQ(lengths, (std::vector<size_t>{37, 33, 38, 12}));
  EXPECT_EQ(workload.max_tokens, (std::vector<int>{5, 8, 5, 7}));
  EXPECT_EQ(std::vector<int>(workload.prompts[0].begin(), workload.prompts[0].begin() + 5),
            (std::vector<int>{1577, 1722, 165, 1060, 1990}));
}

TEST(BenchWorkload, Batch1PromptIsRunShsPrompt) {
  // seed(0); [randint(0, 10000) for _ in range(128)]: first and last three values.
  const std::vector<int> prompt = make_batch1_prompt(128, 10000, 0);
  ASSERT_EQ(prompt.size(), 128u);
  EXPECT_EQ(std::vector<int>(prompt.begin(), prompt.begin() + 3),
            (std::vector<int>{6311, 6890, 663}));
  EXPECT_EQ(std::vector<int>(prompt.end() - 3, prompt.end()), (std::vector<int>{2397, 3584, 741}));
}

TEST(BenchWorkload, InconsistentSpecsAreRejected) {
  BenchWorkloadSpec spec;
  spec.max_input_len = 50;  // below the default min_input_len of 100
  EXPECT_THROW(make_bench_workload(spec), Error);
  spec = BenchWorkloadSpec{};
  spec.num_seqs = 0;
  EXPECT_THROW(make_bench_workload(spec), Error);
  EXPECT_THROW(make_batch1_prompt(0, 10000, 0), Error);
}

}  // namespace
}  // namespace nanovllm
