// The nanovllm command: generate and tokenize.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

#include "core/check.h"
#include "nanovllm/generate_command.h"
#include "nanovllm/tokenize_command.h"

int main(int argc, char** argv) {
  CLI::App app{"nano-vllm in C++: offline LLM inference for Qwen3 models"};
  app.require_subcommand(1);
  nanovllm::GenerateOptions generate;
  nanovllm::TokenizeOptions tokenize;
  CLI::App* generate_command = nanovllm::add_generate_command(app, generate);
  CLI::App* tokenize_command = nanovllm::add_tokenize_command(app, tokenize);
  CLI11_PARSE(app, argc, argv);
  try {
    if (generate_command->parsed()) return nanovllm::run_generate(generate);
    if (tokenize_command->parsed()) return nanovllm::run_tokenize(tokenize);
  } catch (const std::exception& error) {
    std::cerr << "nanovllm: error: " << error.what() << "\n";
    return 2;
  }
  return 2;
}
