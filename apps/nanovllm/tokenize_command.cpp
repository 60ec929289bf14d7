#include "nanovllm/tokenize_command.h"

#include <nlohmann/json.hpp>

#include <optional>

#include "core/check.h"
#include "core/json_input.h"
#include "llm/chat_prompt.h"
#include "nanovllm/json_lines.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm {
namespace {

nlohmann::ordered_json tokenize_line(const std::string& line, const Tokenizer& tokenizer,
                                     std::optional<ChatPrompt>& chat, bool skip_special_tokens) {
  auto request = parse_json<nlohmann::ordered_json>(line);
  if (!request.is_object()) throw Error("a line must be a JSON object");
  if (request.contains("text")) {
    if (!request["text"].is_string()) throw Error("'text' must be a string");
    return {{"ids", tokenizer.encode(request["text"].get<std::string>())}};
  }
  if (request.contains("ids")) {
    const nlohmann::ordered_json& ids = request["ids"];
    if (!ids.is_array()) throw Error("'ids' must be a list of integers");
    std::vector<int> values;
    for (const auto& id : ids) {
      // Ids past the vocabulary decode to nothing; negative or oversized ones are no ids at all.
      if (!id.is_number_unsigned() || id.get<uint64_t>() > INT32_MAX) {
        throw Error(fmt::format("'ids' must be a list of non-negative integers, found {}",
                                json_excerpt(id)));
      }
      values.push_back(id.get<int>());
    }
    return {{"text", tokenizer.decode(values, skip_special_tokens)}};
  }
  if (request.contains("messages")) {
    if (!chat) chat.emplace(tokenizer);
    const nlohmann::ordered_json& flag =
        request.value("add_generation_prompt", nlohmann::ordered_json(false));
    if (!flag.is_boolean()) throw Error("'add_generation_prompt' must be true or false");
    const std::string text =
        chat->render(request["messages"], flag.get<bool>(),
                     request.value("chat_template_kwargs", nlohmann::ordered_json::object()));
    return {{"text", text}, {"ids", tokenizer.encode(text)}};
  }
  throw Error("a line needs 'text', 'ids' or 'messages'");
}

}  // namespace

CLI::App* add_tokenize_command(CLI::App& app, TokenizeOptions& options) {
  CLI::App* command =
      app.add_subcommand("tokenize", "Encode, decode and render chat templates (JSON lines)");
  command->add_option("--model", options.model, "model directory with tokenizer.json")->required();
  command->add_option("--input", options.input, "JSON lines, '-' for stdin")->capture_default_str();
  command->add_option("--output", options.output, "JSON lines, '-' for stdout")
      ->capture_default_str();
  command->add_flag("--skip-special-tokens", options.skip_special_tokens,
                    "leave special tokens out of decoded text");
  return command;
}

int run_tokenize(const TokenizeOptions& options) {
  const Tokenizer tokenizer = Tokenizer::from_dir(options.model);
  std::optional<ChatPrompt> chat;  // parsed on first use
  JsonLinesIO io(options.input, options.output);
  int failed = 0;
  std::string line;
  while (std::getline(io.in(), line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      io.write(tokenize_line(line, tokenizer, chat, options.skip_special_tokens));
    } catch (const Error& error) {
      io.write({{"error", error.what()}});
      ++failed;
    }
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace nanovllm
