// Hundreds of random requests through a small pool: allocation, prefix hits, preemption,
// chunked prefill and completion, with the pool's invariants checked after every step and
// every output compared with the request run alone.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "engine_harness.h"

namespace nanovllm {
namespace {

using namespace nanovllm::testing;

struct RandomRun {
  uint64_t seed;
  int num_requests;
};

class RandomizedEngine : public ::testing::TestWithParam<RandomRun> {};

TEST_P(RandomizedEngine, InvariantsHoldEveryStepAndOutputsMatchReference) {
  const RandomRun run = GetParam();
  std::mt19937_64 gen(run.seed);
  const auto uniform = [&gen](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(gen);
  };
  const EngineSetup setup = random_small_setup(gen);
  const Workload workload =
      make_workload(run.seed * 7919 + 1, run.num_requests, setup.vocab_size, 30, 30, 30);
  SCOPED_TRACE(::testing::Message()
               << "block_size " << setup.block_size << " num_blocks " << setup.num_blocks
               << " max_num_batched_tokens " << setup.max_num_batched_tokens << " max_num_seqs "
               << setup.max_num_seqs << " prefix_caching " << setup.prefix_caching);

  FakeEngine fake = make_fake_engine(setup);
  LLMEngine& engine = *fake.engine;
  const int max_len = engine.max_model_len();
  std::map<int64_t, size_t> index_of;
  std::map<size_t, RequestOutput> outputs;
  size_t next = 0;
  int steps = 0;
  while (next < workload.prompts.size() || !engine.is_finished()) {
    // Requests arrive in random bursts.
    for (int burst = uniform(0, 6); burst > 0 && next < workload.prompts.size(); --burst, ++next) {
      index_of[engine.add_request(workload.prompts[next], workload.params[next])] = next;
    }
    StepResult result = engine.step();
    ++steps;
    ASSERT_LT(steps, 100000) << "no progress";
    for (RequestOutput& output : result.finished) {
      ASSERT_TRUE(outputs.emplace(index_of.at(output.request_id), std::move(output)).second);
    }
    const Scheduler& scheduler = engine.scheduler();
    ASSERT_NO_THROW(scheduler.block_manager().check_consistency(scheduler.sequences()));
    ASSERT_LE(static_cast<int>(scheduler.running().size()), setup.max_num_seqs);
  }

  // Every step respected the limits and never scheduled a sequence twice.
  for (const RecordedStep& step : fake.executor->steps()) {
    std::set<int64_t> ids;
    int tokens = 0;
    for (const RecordedEntry& entry : step.entries) {
      EXPECT_TRUE(ids.insert(entry.seq_id).second);
      tokens += entry.num_new_tokens;
      if (!step.is_prefill) {
        EXPECT_EQ(entry.num_new_tokens, 1);
      }
    }
    EXPECT_LE(static_cast<int>(step.entries.size()), setup.max_num_seqs);
    if (step.is_prefill) {
      EXPECT_LE(tokens, setup.max_num_batched_tokens);
    }
  }

  ASSERT_EQ(outputs.size(), workload.prompts.size());
  for (size_t i = 0; i < workload.prompts.size(); ++i) {
    const RequestOutput& output = outputs.at(i);
    if (static_cast<int>(workload.prompts[i].size()) > max_len) {
      EXPECT_FALSE(output.ok()) << "request " << i;
      EXPECT_NE(output.error.find("KV cache"), std::string::npos) << output.error;
      continue;
    }
    expect_same_output(output,
                       reference_generate(workload.prompts[i], workload.params[i], kEosTokenIds,
                                          max_len, setup.vocab_size),
                       i);
  }
  expect_pool_empty(engine);

  const SchedulerStats& stats = engine.scheduler().stats();
  RecordProperty("preemptions", static_cast<int>(stats.num_preemptions));
  RecordProperty("prefix_hit_tokens", static_cast<int>(stats.num_prefix_hit_tokens));
  RecordProperty("partial_prefills", static_cast<int>(stats.num_partial_prefills));
}

std::vector<RandomRun> random_runs() {
  std::vector<RandomRun> runs;
  for (uint64_t seed = 1; seed <= 12; ++seed) runs.push_back({seed, 300});
  return runs;
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomizedEngine, ::testing::ValuesIn(random_runs()),
                         [](const ::testing::TestParamInfo<RandomRun>& info) {
                           return "seed" + std::to_string(info.param.seed);
                         });

// Across the runs above every mechanism must actually have been exercised.
TEST(RandomizedEngineCoverage, RunsExercisePreemptionPrefixHitsAndChunking) {
  int64_t preemptions = 0, hits = 0, partial = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    EngineSetup setup;
    setup.num_blocks = 20;
    setup.max_num_batched_tokens = 16;
    FakeEngine fake = make_fake_engine(setup);
    const Workload workload = make_workload(seed, 100, setup.vocab_size, 30, 30, 30);
    fake.engine->generate(workload.prompts, workload.params, false);
    const SchedulerStats& stats = fake.engine->scheduler().stats();
    preemptions += stats.num_preemptions;
    hits += stats.num_prefix_hit_tokens;
    partial += stats.num_partial_prefills;
  }
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(hits, 0);
  EXPECT_GT(partial, 0);
}

}  // namespace
}  // namespace nanovllm
