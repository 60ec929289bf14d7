// generate()'s callbacks: each output reported once as it becomes final, and a stop request
// that ends every unfinished request, frees the KV cache and leaves the engine reusable.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "core/check.h"
#include "engine/llm_engine.h"
#include "engine_harness.h"

namespace nanovllm {
namespace {

using namespace nanovllm::testing;

struct Reported {
  std::vector<size_t> order;
  std::vector<RequestOutput> outputs;
};

LLMEngine::OutputCallback record(Reported& reported) {
  return [&reported](size_t index, const RequestOutput& output) {
    reported.order.push_back(index);
    reported.outputs.push_back(output);
  };
}

TEST(GenerateHooks, EveryOutputIsReportedOnceWithItsIndex) {
  Workload workload = make_workload(3, 30, 64);
  workload.prompts[4].clear();  // rejected: reported too
  FakeEngine fake = make_fake_engine(EngineSetup{});
  Reported reported;
  const std::vector<RequestOutput> outputs =
      fake.engine->generate(workload.prompts, workload.params, false, record(reported));
  ASSERT_EQ(reported.order.size(), outputs.size());
  EXPECT_EQ(std::set<size_t>(reported.order.begin(), reported.order.end()).size(), outputs.size());
  EXPECT_EQ(reported.order.front(), 4u);  // final before any step ran
  for (size_t k = 0; k < reported.order.size(); ++k) {
    expect_same_output(reported.outputs[k], outputs[reported.order[k]], reported.order[k]);
  }
}

TEST(GenerateHooks, StopEndsUnfinishedRequestsAndFreesTheirBlocks) {
  const Workload workload = make_workload(5, 30, 64, 20, 20, 200);
  EngineSetup setup;
  setup.num_blocks = 64;  // preemptions and a chunked prefill in flight
  setup.max_num_batched_tokens = 32;
  FakeEngine fake = make_fake_engine(setup);
  int polls = 0;
  Reported reported;
  const std::vector<RequestOutput> outputs = fake.engine->generate(
      workload.prompts, workload.params, false, record(reported),
      [&polls] { return ++polls == 12 ? std::string("stopped by the test") : std::string(); });
  EXPECT_EQ(polls, 12);
  EXPECT_EQ(reported.order.size(), outputs.size());
  int stopped = 0;
  for (const RequestOutput& output : outputs) {
    if (output.error.empty()) {
      EXPECT_FALSE(output.finish_reason.empty());
    } else {
      EXPECT_EQ(output.error, "stopped by the test");
      EXPECT_TRUE(output.finish_reason.empty());
      ++stopped;
    }
  }
  EXPECT_GT(stopped, 0);
  EXPECT_TRUE(fake.engine->is_finished());
  expect_pool_empty(*fake.engine);
  // The engine runs the next generate() as a fresh one would.
  const std::vector<RequestOutput> again =
      fake.engine->generate(workload.prompts, workload.params, false);
  FakeEngine fresh = make_fake_engine(setup);
  const std::vector<RequestOutput> expected =
      fresh.engine->generate(workload.prompts, workload.params, false);
  ASSERT_EQ(again.size(), expected.size());
  for (size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].token_ids, expected[i].token_ids) << i;
  }
}

TEST(GenerateHooks, AThrowingCallbackLeavesTheEngineIdle) {
  const Workload workload = make_workload(6, 10, 64);
  FakeEngine fake = make_fake_engine(EngineSetup{});
  EXPECT_THROW(fake.engine->generate(
                   workload.prompts, workload.params, false,
                   [](size_t, const RequestOutput&) { throw std::runtime_error("callback"); }),
               std::runtime_error);
  EXPECT_TRUE(fake.engine->is_finished());
  expect_pool_empty(*fake.engine);
  EXPECT_EQ(fake.engine->generate(workload.prompts, workload.params, false).size(), 10u);
}

}  // namespace
}  // namespace nanovllm
