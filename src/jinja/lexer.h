// Splits a template into data and tag tokens the way jinja2's lexer does with the settings
// transformers uses (trim_blocks, lstrip_blocks, no trailing newline, `-`/`+` markers).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm::jinja {

enum class TokenType {
  Data,
  VariableBegin,
  VariableEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Integer,
  Float,
  Operator,
  Eof,
};

struct Token {
  TokenType type;
  std::string text;  // data, name, operator, or the decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int column = 1;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws TemplateError (with position) on unterminated tags, strings or comments.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

const char* token_type_name(TokenType type);

}  // namespace nanovllm::jinja
