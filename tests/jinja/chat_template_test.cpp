// ChatTemplate with the Qwen3 template: the renderings transformers produced, and transformers'
// conventions for the template variables.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "jinja/chat_template.h"
#include "jinja/error.h"

namespace nanovllm {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ordered_json load(const std::string& name) {
  std::ifstream in(std::string(NANOVLLM_TEST_DATA_DIR) + "/qwen3-tokenizer/" + name);
  EXPECT_TRUE(in.good()) << name;
  return ordered_json::parse(in);
}

std::string qwen3_template() {
  return load("tokenizer_config.json").at("chat_template").get<std::string>();
}

TEST(ChatTemplate, MatchesTransformersReferenceRenderings) {
  ordered_json cases = load("reference_cases.json").at("chat_template");
  ASSERT_FALSE(cases.empty());
  ChatTemplate chat(qwen3_template());
  for (const auto& c : cases) {
    ordered_json kwargs = {{"enable_thinking", c.at("enable_thinking")}};
    EXPECT_EQ(chat.render_ordered(c.at("messages"), true, kwargs), c.at("text").get<std::string>());
    EXPECT_EQ(chat.render(json(c.at("messages")), true, json(kwargs)),
              c.at("text").get<std::string>());
  }
}

TEST(ChatTemplate, MultiTurnWithThinkingAndTools) {
  ChatTemplate chat(qwen3_template());
  ordered_json messages = ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "", "reasoning_content": "Need the tool.",
     "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "sunny"},
    {"role": "assistant", "content": "<think>\nIt is sunny.\n</think>\n\nSunny."}
  ])");
  ordered_json tools = ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])");
  std::string out = chat.render_ordered(messages, false, {{"tools", tools}});
  const std::string expected =
      "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist "
      "with "
      "the user query.\n\nYou are provided with function signatures within <tools></tools> XML "
      "tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
      "\"parameters\": {\"type\": \"object\"}}}\n</tools>\n\nFor each function call, return a json "
      "object with function name and arguments within <tool_call></tool_call> XML tags:\n"
      "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
      "</tool_call><|im_end|>\n<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
      "<think>\nNeed the tool.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n"
      "</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\nIt is sunny.\n</think>\n\n"
      "Sunny.<|im_end|>\n";
  EXPECT_EQ(out, expected);
}

TEST(ChatTemplate, ReasoningUnderOtherNamesIsAliased) {
  // transformers copies `thinking` / `reasoning` into `reasoning_content` before rendering.
  ChatTemplate chat(qwen3_template());
  ordered_json messages = ordered_json::parse(R"([
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello", "thinking": "greet"}
  ])");
  EXPECT_EQ(chat.render_ordered(messages, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\ngreet\n</think>\n\n"
            "Hello<|im_end|>\n");
}

TEST(ChatTemplate, VariablesFollowTransformersConventions) {
  ChatTemplate chat(
      "{{ bos_token }}{{ tools is none }}{{ documents is none }}{{ add_generation_prompt }}"
      "{{ messages|length }}{{ custom }}");
  EXPECT_EQ(chat.render(json::array({{{"role", "user"}, {"content", "x"}}}), true,
                        {{"bos_token", "<s>"}, {"custom", 7}}),
            "<s>TrueTrueTrue17");
  EXPECT_THROW(chat.render(json::object(), false), Error);
  EXPECT_THROW(chat.render(json::array({1}), false), Error);
  EXPECT_THROW(chat.render(json::array(), false, {{"messages", 1}}), Error);
}

TEST(ChatTemplate, RendersConcurrentlyFromOneParsedTemplate) {
  ChatTemplate chat(qwen3_template());
  ordered_json messages = ordered_json::parse(R"([
    {"role": "system", "content": "s"}, {"role": "user", "content": "u"},
    {"role": "assistant", "content": "<think>r</think>a"}, {"role": "user", "content": "u2"}])");
  const std::string expected = chat.render_ordered(messages, true, {{"enable_thinking", false}});
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (chat.render_ordered(messages, true, {{"enable_thinking", false}}) != expected) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ChatTemplate, RaiseExceptionSurfacesTheTemplatesMessage) {
  ChatTemplate chat(
      "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
      "{% endif %}{% endfor %}");
  try {
    chat.render(json::array({{{"role", "assistant"}, {"content", "x"}}}), false);
    FAIL() << "expected raise_exception to throw";
  } catch (const jinja::TemplateError& e) {
    EXPECT_STREQ(e.what(), "Conversation roles must alternate user/assistant/user/assistant/...");
  }
}

}  // namespace
}  // namespace nanovllm
