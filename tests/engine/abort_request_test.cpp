// LLMEngine::abort_request: a request ended between steps frees its blocks at once, comes back
// with the reason as its error, and the others finish exactly as if it had never been added.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine_harness.h"

namespace nanovllm {
namespace {

using namespace nanovllm::testing;

Workload long_requests(int count) {
  Workload workload = make_workload(5, count, EngineSetup{}.vocab_size, 10, 10, 30);
  for (SamplingParams& params : workload.params) {
    params.ignore_eos = true;
    params.max_tokens = 30;
    params.seed = 7;
  }
  return workload;
}

TEST(AbortRequest, FreesItsBlocksAndLeavesTheOthersUntouched) {
  const Workload workload = long_requests(6);
  const std::vector<RequestOutput> expected =
      make_fake_engine(EngineSetup{}).engine->generate(workload.prompts, workload.params, false);
  FakeEngine fake = make_fake_engine(EngineSetup{});
  LLMEngine& engine = *fake.engine;
  std::vector<int64_t> ids;
  for (size_t i = 0; i < workload.prompts.size(); ++i) {
    ids.push_back(engine.add_request(workload.prompts[i], workload.params[i]));
  }
  for (int i = 0; i < 4; ++i) engine.step();  // prefill and a few decode steps
  const int free_before = engine.scheduler().block_manager().num_free_blocks();
  ASSERT_NE(engine.sequence(ids[2]), nullptr);
  const int held = static_cast<int>(engine.sequence(ids[2])->block_table.size());
  ASSERT_GT(held, 0);

  const std::optional<RequestOutput> aborted = engine.abort_request(ids[2], "client went away");
  ASSERT_TRUE(aborted.has_value());
  EXPECT_EQ(aborted->error, "client went away");
  EXPECT_EQ(aborted->request_id, ids[2]);
  EXPECT_EQ(engine.sequence(ids[2]), nullptr);
  EXPECT_GE(engine.scheduler().block_manager().num_free_blocks(), free_before + 1);
  EXPECT_FALSE(engine.abort_request(ids[2], "again").has_value());

  std::map<int64_t, RequestOutput> finished;
  while (!engine.is_finished()) {
    for (RequestOutput& output : engine.step().finished) finished[output.request_id] = output;
  }
  ASSERT_EQ(finished.size(), ids.size() - 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i != 2) expect_same_output(finished.at(ids[i]), expected[i], i);
  }
  EXPECT_EQ(engine.scheduler().block_manager().num_free_blocks(), EngineSetup{}.num_blocks);
}

TEST(AbortRequest, WaitingAndRejectedRequests) {
  FakeEngine fake = make_fake_engine(EngineSetup{});
  LLMEngine& engine = *fake.engine;
  const int64_t waiting = engine.add_request({1, 2, 3}, SamplingParams{});
  const int64_t rejected = engine.add_request({}, SamplingParams{});
  const std::optional<RequestOutput> first = engine.abort_request(waiting, "cancelled");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->error, "cancelled");
  const std::optional<RequestOutput> second = engine.abort_request(rejected, "cancelled");
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(second->error.find("empty"), std::string::npos);  // keeps its own error
  EXPECT_TRUE(engine.is_finished());
  EXPECT_TRUE(engine.step().finished.empty());
  EXPECT_FALSE(engine.abort_request(12345, "unknown").has_value());
}

}  // namespace
}  // namespace nanovllm
