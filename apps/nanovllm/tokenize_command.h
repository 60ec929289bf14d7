// `nanovllm tokenize`: JSON lines in, one out per line:
//   {"text": s} -> {"ids": [...]};  {"ids": [...]} -> {"text": s};
//   {"messages": [...], "add_generation_prompt": b, "chat_template_kwargs": {...}}
//     -> {"text": s, "ids": [...]}
// A bad line gives {"error": "..."} and the others go on.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace nanovllm {

struct TokenizeOptions {
  std::string model;
  std::string input = "-";
  std::string output = "-";
  bool skip_special_tokens = false;
};

CLI::App* add_tokenize_command(CLI::App& app, TokenizeOptions& options);

// Returns 0 when every line succeeded, 1 otherwise.
int run_tokenize(const TokenizeOptions& options);

}  // namespace nanovllm
