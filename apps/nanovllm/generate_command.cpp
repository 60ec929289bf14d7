#include "nanovllm/generate_command.h"

#include <iostream>

#include "core/check.h"
#include "llm/request_json.h"
#include "nanovllm/json_lines.h"
#include "nanovllm/llm.h"

namespace nanovllm {

CLI::App* add_generate_command(CLI::App& app, GenerateOptions& options) {
  CLI::App* command = app.add_subcommand("generate", "Generate completions for prompts");
  command->add_option("--model", options.model, "Hugging Face model directory")->required();
  command->add_option("--input", options.input,
                      "JSON-lines requests, '-' for stdin (the default without --prompt)");
  command->add_option("--output", options.output, "JSON-lines outputs, '-' for stdout")
      ->capture_default_str();
  command->add_option("--prompt", options.prompts, "a text prompt (repeatable)");
  command->add_flag("--no-progress", options.no_progress, "no progress line on stderr");
  options.engine.add_to(*command);
  options.sampling.add_to(*command);
  return command;
}

int run_generate(const GenerateOptions& options) {
  const SamplingParams defaults = options.sampling.resolve();
  const EngineConfig config = options.engine.resolve();
  const std::string input = options.input.empty() && options.prompts.empty() ? "-" : options.input;
  JsonLinesIO io(input, options.output);

  // Requests in input order: --prompt ones first, then the input's lines. A line that does not
  // parse becomes a request that fails alone.
  std::vector<Request> requests;
  for (const std::string& text : options.prompts) {
    requests.push_back(
        {Prompt::from_text(text), defaults, text.empty() ? "'prompt' is empty" : ""});
  }
  if (!input.empty()) {
    std::string line;
    while (std::getline(io.in(), line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        requests.push_back(parse_request_line(line, defaults));
      } catch (const Error& error) {
        requests.push_back({Prompt::from_token_ids({}), defaults, error.what()});
      }
    }
  }

  LLM llm(options.model, config);
  const std::vector<RequestOutput> outputs = llm.generate(requests, !options.no_progress);
  int failed = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    io.write(output_to_json(i, outputs[i]));
    if (!outputs[i].ok()) ++failed;
  }
  if (failed > 0)
    std::cerr << "nanovllm generate: " << failed << " of " << outputs.size()
              << " requests failed\n";
  return failed > 0 ? 1 : 0;
}

}  // namespace nanovllm
