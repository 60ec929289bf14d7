// Command-line flags for EngineConfig and SamplingParams, named after nano-vllm's Config.
#pragma once

#include <CLI/CLI.hpp>

#include "nanovllm/engine_config.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm {

struct EngineFlags {
  EngineConfig config;
  bool no_prefix_caching = false;
  bool no_async_scheduling = false;

  void add_to(CLI::App& command);
  // The config with the flags applied, validated.
  EngineConfig resolve() const;
};

struct SamplingFlags {
  SamplingParams params;
  int64_t seed = -1;  // -1 = none

  void add_to(CLI::App& command);
  SamplingParams resolve() const;
};

}  // namespace nanovllm
