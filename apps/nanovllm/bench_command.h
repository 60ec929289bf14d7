// `nanovllm bench`: nano-vllm's bench.py workload (or, with --batch-1, run.sh's batch-1 decode)
// after bench.py's warm-up; prints bench.py's result line, the start-up time, and one JSON line
// with the details (step statistics, peak device memory, settings).
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <string>

#include "nanovllm/bench_workload.h"
#include "nanovllm/engine_flags.h"

namespace nanovllm {

struct BenchOptions {
  std::string model;
  EngineFlags engine;
  BenchWorkloadSpec workload;
  double temperature = 0.6;
  bool batch1 = false;
  int batch1_prompt_len = 128;
  int batch1_warmup_tokens = 32;
  int batch1_output_len = 1024;
  // Taken at the top of main(): start-up is measured from here to the engine being ready.
  std::chrono::steady_clock::time_point process_start = std::chrono::steady_clock::now();
};

CLI::App* add_bench_command(CLI::App& app, BenchOptions& options);

// Returns the exit status (0); throws Error for bad settings or a request the engine rejects.
int run_bench(const BenchOptions& options);

}  // namespace nanovllm
