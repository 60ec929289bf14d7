// The `is` tests of jinja2 (defined, none, string, mapping, even, equalto, ...).
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace nanovllm::jinja {

// nullptr for names jinja2 does not know.
TestFn find_test(std::string_view name);

}  // namespace nanovllm::jinja
