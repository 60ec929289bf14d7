// The nanovllm command: generate, tokenize and bench.
#include <CLI/CLI.hpp>

#include <chrono>
#include <exception>
#include <iostream>

#include "core/check.h"
#include "nanovllm/bench_command.h"
#include "nanovllm/generate_command.h"
#include "nanovllm/tokenize_command.h"

int main(int argc, char** argv) {
  // Before anything else, so bench's start-up time covers argument parsing and model loading.
  const auto process_start = std::chrono::steady_clock::now();
  CLI::App app{"nano-vllm in C++: offline LLM inference for Qwen3 models"};
  app.require_subcommand(1);
  nanovllm::GenerateOptions generate;
  nanovllm::TokenizeOptions tokenize;
  nanovllm::BenchOptions bench;
  bench.process_start = process_start;
  CLI::App* generate_command = nanovllm::add_generate_command(app, generate);
  CLI::App* tokenize_command = nanovllm::add_tokenize_command(app, tokenize);
  CLI::App* bench_command = nanovllm::add_bench_command(app, bench);
  CLI11_PARSE(app, argc, argv);
  try {
    if (generate_command->parsed()) return nanovllm::run_generate(generate);
    if (tokenize_command->parsed()) return nanovllm::run_tokenize(tokenize);
    if (bench_command->parsed()) return nanovllm::run_bench(bench);
  } catch (const std::exception& error) {
    std::cerr << "nanovllm: error: " << error.what() << "\n";
    return 2;
  }
  return 2;
}
