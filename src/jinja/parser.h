// Builds the syntax tree from tokens, following jinja2's grammar and operator precedence.
#pragma once

#include <string_view>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace nanovllm::jinja {

// Throws TemplateError with the position of the first syntax error: unknown tags, unclosed
// blocks, unknown filters or tests, and constructs this engine does not support. The result's
// scopes are analyzed (see scope_analysis.h).
ParsedTemplate parse_template(std::string_view source, const LexerOptions& options = {});

}  // namespace nanovllm::jinja
