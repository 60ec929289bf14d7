#include "nanovllm/generate_command.h"

#include <iostream>

#include "core/check.h"
#include "llm/request_json.h"
#include "nanovllm/in_order_rows.h"
#include "nanovllm/json_lines.h"
#include "nanovllm/llm.h"
#include "nanovllm/stop_signals.h"

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
  // Each row goes out as soon as the rows before it have, so whatever cuts the run short, the
  // finished rows are in the output and the others come back as error rows.
  InOrderRows rows(io, requests.size());
  size_t failed = 0;
  GenerateHooks hooks;
  hooks.on_output = [&](size_t index, const RequestOutput& output) {
    if (!output.ok()) ++failed;
    rows.add(index, output_to_json(index, output));
  };
  const StopSignals signals;
  hooks.should_stop = [&signals] { return signals.reason(); };
  llm.generate(requests, !options.no_progress, hooks);
  NVLLM_CHECK_EQ(rows.written(), requests.size());
  if (failed > 0) {
    std::cerr << "nanovllm generate: " << failed << " of " << requests.size()
              << " requests failed\n";
  }
  if (signals.received() != 0) {
    std::cerr << "nanovllm generate: " << signals.reason() << "\n";
    return 128 + signals.received();
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace nanovllm
