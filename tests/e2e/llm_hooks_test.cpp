// LLM::generate's hooks report outputs with their input index, rejected requests included, and
// a stop leaves the LLM giving the same outputs as a fresh one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nanovllm/llm.h"

namespace nanovllm {
namespace {

const std::string kModel = std::string(NANOVLLM_TEST_DATA_DIR) + "/models/qwen3-tiny-untied";

EngineConfig cpu_config() {
  EngineConfig config;
  config.device = "cpu";
  return config;
}

std::vector<Request> requests() {
  SamplingParams params;
  params.temperature = 0.8f;
  params.seed = 9;
  params.max_tokens = 20;
  params.ignore_eos = true;
  return {
      {Prompt::from_token_ids({1, 2, 3}), params, ""},
      {Prompt::from_text("no tokenizer"), params, ""},  // cannot be encoded
      {Prompt::from_token_ids({4, 5}), params, "rejected by the caller"},
      {Prompt::from_token_ids({6, 7, 8, 9}), params, ""},
  };
}

TEST(LLMHooks, OutputsCarryTheirInputIndex) {
  LLM llm(kModel, cpu_config());
  std::vector<size_t> order;
  std::vector<std::string> errors(4);
  GenerateHooks hooks;
  hooks.on_output = [&](size_t index, const RequestOutput& output) {
    order.push_back(index);
    errors[index] = output.error;
  };
  const std::vector<RequestOutput> outputs = llm.generate(requests(), false, hooks);
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0], 1u);  // the rejected ones first, before any step
  EXPECT_EQ(order[1], 2u);
  EXPECT_EQ(errors[2], "rejected by the caller");
  EXPECT_NE(errors[1].find("tokenizer.json"), std::string::npos);
  for (size_t i : {0u, 3u}) {
    EXPECT_TRUE(outputs[i].ok()) << outputs[i].error;
    EXPECT_EQ(outputs[i].token_ids.size(), 20u);
  }
}

TEST(LLMHooks, StopThenGenerateAgainEqualsAFreshLLM) {
  LLM llm(kModel, cpu_config());
  int polls = 0;
  GenerateHooks hooks;
  hooks.should_stop = [&polls] { return ++polls == 5 ? std::string("stop") : std::string(); };
  const std::vector<RequestOutput> stopped = llm.generate(requests(), false, hooks);
  EXPECT_EQ(stopped[0].error, "stop");
  EXPECT_EQ(stopped[3].error, "stop");
  EXPECT_LT(stopped[0].token_ids.size(), 20u);

  const std::vector<RequestOutput> again = llm.generate(requests(), false);
  LLM fresh(kModel, cpu_config());
  const std::vector<RequestOutput> expected = fresh.generate(requests(), false);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(again[i].token_ids, expected[i].token_ids) << i;
    EXPECT_EQ(again[i].error, expected[i].error) << i;
  }
}

TEST(LLMHooks, CheckRequestNamesWhyARequestCannotRun) {
  LLM llm(kModel, cpu_config());
  EXPECT_FALSE(llm.check_request({1, 2}, SamplingParams{}));
  EXPECT_NE(llm.check_request({}, SamplingParams{})->find("empty"), std::string::npos);
  SamplingParams bad;
  bad.top_p = 0.0f;
  EXPECT_NE(llm.check_request({1}, bad)->find("top_p"), std::string::npos);
  EXPECT_EQ(llm.prompt_token_ids(Prompt::from_token_ids({3, 4})), (std::vector<int>{3, 4}));
  EXPECT_THROW(llm.prompt_token_ids(Prompt::from_text("x")), std::exception);
}

}  // namespace
}  // namespace nanovllm
