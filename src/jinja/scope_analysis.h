// Decides, like jinja2's compiler (idtracking.py), which names are local to each scope and how
// each starts out. This is what makes `{% set %}` in a loop body invisible to the next
// iteration, and a name assigned later in a scope shadow the context from the scope's start.
#pragma once

#include "jinja/ast.h"

namespace nanovllm::jinja {

// Fills the ScopeInfo of the template and of every scope-opening statement in it.
void analyze_scopes(ParsedTemplate& tmpl);

}  // namespace nanovllm::jinja
