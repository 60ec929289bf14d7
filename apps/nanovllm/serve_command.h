// `nanovllm serve`: the model behind an OpenAI-compatible HTTP API (src/server).
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>

#include "nanovllm/engine_flags.h"

namespace nanovllm {

struct ServeOptions {
  std::string model;
  EngineFlags engine;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;            // "" = none
  std::string served_model_name;  // "" = the --model argument
  size_t max_pending_requests = 1024;
  size_t max_request_body_bytes = 4 << 20;
  size_t max_prompts_per_request = 256;
  size_t max_connections = 0;  // 0 = the open-file limit less kReservedFiles
  double write_timeout_seconds = 60;
  int io_threads = 1;
};

CLI::App* add_serve_command(CLI::App& app, ServeOptions& options);

// Serves until SIGINT or SIGTERM, then stops accepting, ends in-flight streams with an error
// event and returns 0.
int run_serve(const ServeOptions& options);

}  // namespace nanovllm
