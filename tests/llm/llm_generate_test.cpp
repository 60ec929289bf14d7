// LLM::generate's hooks over the tiny random-weight Qwen3 on the CPU: every request reported once
// under its input index (those that fail before running too), and a stop request that fails the
// unfinished ones and leaves the LLM usable.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "nanovllm/llm.h"

namespace nanovllm {
namespace {

LLM& tiny_llm() {
  static LLM llm = [] {
    EngineConfig config;
    config.device = "cpu";
    config.max_num_seqs = 4;
    return LLM(std::string(NANOVLLM_TEST_DATA_DIR) + "/models/qwen3-tiny-tied", config);
  }();
  return llm;
}

Request seeded(Prompt prompt, int max_tokens, uint64_t seed) {
  Request request{std::move(prompt), {}, {}};
  request.params.max_tokens = max_tokens;
  request.params.ignore_eos = true;
  request.params.seed = seed;
  return request;
}

std::vector<Request> mixed_requests() {
  std::vector<Request> requests;
  requests.push_back(seeded(Prompt::from_text("Hello"), 3, 1));
  requests.push_back({Prompt::from_text("x"), {}, "failed before it ran"});
  requests.push_back(seeded(Prompt::from_messages(nlohmann::ordered_json::array()), 3, 2));
  requests.push_back(seeded(Prompt::from_token_ids({5, 6, 7}), 2, 3));
  requests.push_back(seeded(Prompt::from_text("a long one"), 40, 4));
  return requests;
}

TEST(LLMGenerate, OnOutputReportsEveryRequestOnceUnderItsInputIndex) {
  const std::vector<Request> requests = mixed_requests();
  std::map<size_t, RequestOutput> reported;
  GenerateHooks hooks;
  hooks.on_output = [&](size_t index, const RequestOutput& output) {
    EXPECT_TRUE(reported.emplace(index, output).second) << "request " << index << " twice";
  };
  const std::vector<RequestOutput> outputs = tiny_llm().generate(requests, false, hooks);
  ASSERT_EQ(outputs.size(), requests.size());
  ASSERT_EQ(reported.size(), requests.size());
  for (const auto& [index, output] : reported) {
    EXPECT_EQ(output.error, outputs[index].error) << "request " << index;
    EXPECT_EQ(output.token_ids, outputs[index].token_ids) << "request " << index;
  }
  EXPECT_EQ(outputs[1].error, "failed before it ran");
  EXPECT_FALSE(outputs[2].ok());  // an empty conversation
  EXPECT_EQ(outputs[3].token_ids.size(), 2u);
  EXPECT_EQ(outputs[4].token_ids.size(), 40u);
}

TEST(LLMGenerate, ShouldStopFailsTheUnfinishedAndTheLLMStaysUsable) {
  const std::vector<Request> requests = mixed_requests();
  const std::vector<RequestOutput> full = tiny_llm().generate(requests, false);
  int polls = 0;
  GenerateHooks hooks;
  hooks.should_stop = [&polls] { return ++polls > 10 ? "enough" : ""; };
  const std::vector<RequestOutput> stopped = tiny_llm().generate(requests, false, hooks);
  for (size_t i : {0u, 3u}) EXPECT_EQ(stopped[i].token_ids, full[i].token_ids) << i;
  EXPECT_EQ(stopped[1].error, full[1].error);
  EXPECT_EQ(stopped[2].error, full[2].error);
  EXPECT_EQ(stopped[4].error, "enough");
  const std::vector<RequestOutput> again = tiny_llm().generate(requests, false);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(again[i].token_ids, full[i].token_ids) << i;
    EXPECT_EQ(again[i].text, full[i].text) << i;
  }
}

}  // namespace
}  // namespace nanovllm
