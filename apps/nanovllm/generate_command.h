// `nanovllm generate`: JSON-lines requests in, one JSON line per request out, in input order.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "nanovllm/engine_flags.h"

namespace nanovllm {

struct GenerateOptions {
  std::string model;
  std::string input;  // "" = stdin unless --prompt is given
  std::string output = "-";
  std::vector<std::string> prompts;  // --prompt, repeatable
  bool no_progress = false;
  EngineFlags engine;
  SamplingFlags sampling;
};

CLI::App* add_generate_command(CLI::App& app, GenerateOptions& options);

// Returns the exit status: 0 when every request completed, 1 when any failed, 128 + the signal
// when SIGINT or SIGTERM stopped the run (the unfinished requests then get error rows).
int run_generate(const GenerateOptions& options);

}  // namespace nanovllm
