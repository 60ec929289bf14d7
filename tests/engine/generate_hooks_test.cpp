// LLMEngine::generate's callbacks and how a run ends early: each output reported once as soon as
// it is final, a stop request or an engine failure giving every unfinished request an error row
// while finished ones keep their outputs, and the engine usable afterwards in every case.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/check.h"
#include "engine_harness.h"

namespace nanovllm {
namespace {

using namespace nanovllm::testing;

// Requests of very different lengths, so that some finish long before others.
Workload mixed_lengths(int count) {
  Workload workload = make_workload(11, count, EngineSetup{}.vocab_size, 10, 10, 40);
  for (size_t i = 0; i < workload.params.size(); ++i) {
    workload.params[i].ignore_eos = true;
    workload.params[i].max_tokens = i % 2 == 0 ? 2 : 40;
  }
  return workload;
}

std::vector<RequestOutput> clean_outputs(const Workload& workload) {
  return make_fake_engine(EngineSetup{}).engine->generate(workload.prompts, workload.params, false);
}

// Every request reported once; the reports equal the returned outputs.
void expect_reported_once(const std::map<size_t, RequestOutput>& reported,
                          const std::vector<RequestOutput>& outputs) {
  ASSERT_EQ(reported.size(), outputs.size());
  for (const auto& [index, output] : reported) expect_same_output(output, outputs[index], index);
}

TEST(GenerateCallbacks, OnOutputReportsEachRequestOnceAsItFinishes) {
  const Workload workload = mixed_lengths(12);
  Workload with_bad = workload;
  with_bad.prompts[3].clear();  // rejected: an empty prompt
  FakeEngine fake = make_fake_engine(EngineSetup{});
  std::map<size_t, RequestOutput> reported;
  std::vector<size_t> order;
  GenerateCallbacks callbacks;
  callbacks.on_output = [&](size_t index, const RequestOutput& output) {
    EXPECT_TRUE(reported.emplace(index, output).second) << "request " << index << " twice";
    order.push_back(index);
  };
  const std::vector<RequestOutput> outputs =
      fake.engine->generate(with_bad.prompts, with_bad.params, false, callbacks);
  expect_reported_once(reported, outputs);
  EXPECT_NE(outputs[3].error.find("empty"), std::string::npos);
  // The rejection comes first, then short requests before long ones.
  EXPECT_EQ(order.front(), 3u);
  const auto position = [&order](size_t index) {
    return std::find(order.begin(), order.end(), index) - order.begin();
  };
  EXPECT_LT(position(0), position(1));
  const std::vector<RequestOutput> expected = clean_outputs(workload);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i != 3) expect_same_output(outputs[i], expected[i], i);
  }
}

TEST(GenerateCallbacks, ShouldStopFailsUnfinishedRequestsAndTheEngineStaysUsable) {
  const Workload workload = mixed_lengths(12);
  const std::vector<RequestOutput> expected = clean_outputs(workload);
  FakeEngine fake = make_fake_engine(EngineSetup{});
  std::map<size_t, RequestOutput> reported;
  int polls = 0;
  GenerateCallbacks callbacks;
  callbacks.on_output = [&](size_t index, const RequestOutput& output) {
    reported.emplace(index, output);
  };
  // Prefill, then a few decode steps: the 2-token requests are done, the 40-token ones not.
  callbacks.should_stop = [&polls] { return ++polls > 5 ? "stopped by the test" : ""; };
  const std::vector<RequestOutput> outputs =
      fake.engine->generate(workload.prompts, workload.params, false, callbacks);
  expect_reported_once(reported, outputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i % 2 == 0) {
      expect_same_output(outputs[i], expected[i], i);
    } else {
      EXPECT_EQ(outputs[i].error, "stopped by the test") << "request " << i;
    }
  }
  EXPECT_TRUE(fake.engine->is_finished());
  EXPECT_EQ(fake.engine->num_unfinished(), 0u);
  expect_pool_empty(*fake.engine);
  expect_same_outputs(fake.engine->generate(workload.prompts, workload.params, false), expected);
}

TEST(GenerateCallbacks, StopBeforeTheFirstStepFailsEveryRequest) {
  const Workload workload = mixed_lengths(4);
  Workload with_bad = workload;
  with_bad.params[1].temperature = -1.0f;  // rejected: keeps its own error
  FakeEngine fake = make_fake_engine(EngineSetup{});
  GenerateCallbacks callbacks;
  callbacks.should_stop = [] { return "stop at once"; };
  const std::vector<RequestOutput> outputs =
      fake.engine->generate(with_bad.prompts, with_bad.params, false, callbacks);
  EXPECT_NE(outputs[1].error.find("temperature"), std::string::npos) << outputs[1].error;
  for (size_t i : {0u, 2u, 3u}) EXPECT_EQ(outputs[i].error, "stop at once");
  expect_pool_empty(*fake.engine);
}

TEST(GenerateCallbacks, EngineFailureFailsUnfinishedRequestsAndTheEngineStaysUsable) {
  const Workload workload = mixed_lengths(12);
  const std::vector<RequestOutput> expected = clean_outputs(workload);
  FakeEngine fake = make_fake_engine(EngineSetup{});
  int steps = 0;
  fake.executor->faults().before_step = [&steps](const ScheduledBatch&) {
    if (++steps == 4) throw Error("device lost");
  };
  const std::vector<RequestOutput> outputs =
      fake.engine->generate(workload.prompts, workload.params, false);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i % 2 == 0) {
      expect_same_output(outputs[i], expected[i], i);
    } else {
      EXPECT_EQ(outputs[i].error, "the engine failed: device lost") << "request " << i;
    }
  }
  expect_pool_empty(*fake.engine);
  fake.executor->faults().before_step = nullptr;
  expect_same_outputs(fake.engine->generate(workload.prompts, workload.params, false), expected);
}

TEST(GenerateCallbacks, ACallbackThatThrowsLeavesTheEngineIdle) {
  const Workload workload = mixed_lengths(6);
  FakeEngine fake = make_fake_engine(EngineSetup{});
  GenerateCallbacks callbacks;
  callbacks.on_output = [](size_t, const RequestOutput&) { throw Error("disk full"); };
  EXPECT_THROW(fake.engine->generate(workload.prompts, workload.params, false, callbacks), Error);
  EXPECT_TRUE(fake.engine->is_finished());
  EXPECT_EQ(fake.engine->num_unfinished(), 0u);
  expect_pool_empty(*fake.engine);
  expect_same_outputs(fake.engine->generate(workload.prompts, workload.params, false),
                      clean_outputs(workload));
}

}  // namespace
}  // namespace nanovllm
