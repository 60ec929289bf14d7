// The filter table: jinja2's builtin filters that chat templates use, with transformers' tojson.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "jinja/ast.h"

namespace nanovllm::jinja {

// nullptr for names jinja2 does not know (a syntax error there too). jinja2 filters this engine
// lacks resolve to a function that raises a clear error when the filter runs.
FilterFn find_filter(std::string_view name);

using FilterTable = std::vector<std::pair<const char*, FilterFn>>;
const FilterTable& string_filters();
const FilterTable& sequence_filters();

}  // namespace nanovllm::jinja
