// The nanovllm command: generate, tokenize, bench and serve.
#include <CLI/CLI.hpp>

#include <chrono>
#include <exception>
#include <iostream>

#include "core/check.h"
#include "nanovllm/bench_command.h"
#include "nanovllm/generate_command.h"
#include "nanovllm/serve_command.h"
#include "nanovllm/tokenize_command.h"

int main(int argc, char** argv) {
  // Before anything else, so bench's start-up time covers argument parsing and model loading.
  const auto process_start = std::chrono::steady_clock::now();
  CLI::App app{"nano-vllm in C++: LLM inference for Qwen3 models"};
  app.require_subcommand(1);
  nanovllm::GenerateOptions generate;
  nanovllm::TokenizeOptions tokenize;
  nanovllm::BenchOptions bench;
  nanovllm::ServeOptions serve;
  bench.process_start = process_start;
  CLI::App* generate_command = nanovllm::add_generate_command(app, generate);
  CLI::App* tokenize_command = nanovllm::add_tokenize_command(app, tokenize);
  CLI::App* bench_command = nanovllm::add_bench_command(app, bench);
  CLI::App* serve_command = nanovllm::add_serve_command(app, serve);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help exits 0; any other usage error is bad setup like a bad model directory: status 2,
    // not CLI11's own 100-odd codes.
    return app.exit(error) == 0 ? 0 : 2;
  }
  try {
    if (generate_command->parsed()) return nanovllm::run_generate(generate);
    if (tokenize_command->parsed()) return nanovllm::run_tokenize(tokenize);
    if (bench_command->parsed()) return nanovllm::run_bench(bench);
    if (serve_command->parsed()) return nanovllm::run_serve(serve);
  } catch (const std::exception& error) {
    std::cerr << "nanovllm: error: " << error.what() << "\n";
    return 2;
  }
  return 2;
}
