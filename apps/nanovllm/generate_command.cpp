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

  // Requests in input order: --prompt ones first, then the input file's lines.
  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  std::vector<std::string> parse_errors;  // per request, empty when it parsed
  for (const std::string& text : options.prompts) {
    prompts.push_back(Prompt::from_text(text));
    params.push_back(defaults);
    parse_errors.emplace_back(text.empty() ? "'prompt' is empty" : "");
  }
  if (!input.empty()) {
    std::string line;
    while (std::getline(io.in(), line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        ParsedRequest request = parse_request_line(line, defaults);
        prompts.push_back(std::move(request.prompt));
        params.push_back(std::move(request.params));
        parse_errors.emplace_back();
      } catch (const Error& error) {
        prompts.push_back(Prompt::from_token_ids({}));
        params.push_back(defaults);
        parse_errors.emplace_back(error.what());
      }
    }
  }

  LLM llm(options.model, config);
  std::vector<Prompt> runnable_prompts;
  std::vector<SamplingParams> runnable_params;
  std::vector<size_t> runnable_index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (!parse_errors[i].empty()) continue;
    runnable_prompts.push_back(std::move(prompts[i]));
    runnable_params.push_back(params[i]);
    runnable_index.push_back(i);
  }
  std::vector<RequestOutput> outputs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) outputs[i].error = parse_errors[i];
  if (!runnable_prompts.empty()) {
    std::vector<RequestOutput> ran =
        llm.generate(runnable_prompts, runnable_params, !options.no_progress);
    for (size_t k = 0; k < ran.size(); ++k) outputs[runnable_index[k]] = std::move(ran[k]);
  }

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
