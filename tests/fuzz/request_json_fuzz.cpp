// One line of `nanovllm generate` input: the JSON request parser, then what the LLM does with an
// accepted request before it runs (Qwen3's chat template for messages, the tokenizer for text)
// and the output row written for it.
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "fuzz_support.h"
#include "llm/chat_prompt.h"
#include "llm/request_json.h"

using namespace nanovllm;

namespace {

const Tokenizer& qwen() {
  static const Tokenizer tokenizer = Tokenizer::from_dir(fuzz::test_data("qwen3-tokenizer"));
  return tokenizer;
}

const ChatPrompt& qwen_chat() {
  static const ChatPrompt chat(qwen());
  return chat;
}

std::vector<int> prompt_ids(const Prompt& prompt) {
  switch (prompt.kind) {
    case Prompt::Kind::kText:
      return qwen().encode(prompt.text);
    case Prompt::Kind::kTokenIds:
      return prompt.token_ids;
    case Prompt::Kind::kMessages:
      return qwen().encode(qwen_chat().render(prompt.messages, true, prompt.chat_template_kwargs));
  }
  return {};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SamplingParams defaults;
  Request request;
  try {
    request = parse_request_line(std::string(fuzz::as_text(data, size)), defaults);
  } catch (const Error&) {
    return 0;
  }
  request.params.validate();  // the parser hands out only valid parameters
  RequestOutput output;
  try {
    output.prompt_token_ids = prompt_ids(request.prompt);
  } catch (const Error& error) {
    output.error = error.what();
  }
  output.token_ids = output.prompt_token_ids;
  output.text = request.prompt.text;  // any bytes: the row must still serialize
  output.finish_reason = "length";
  output_to_json(0, output).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
