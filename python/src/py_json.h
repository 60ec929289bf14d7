// Python values <-> JSON, for chat messages and template variables (in) and outputs (out).
// Dict key order is kept both ways, as chat templates see it in transformers.
#pragma once

#include <nanobind/nanobind.h>
#include <nlohmann/json.hpp>

#include <string_view>

namespace nanovllm::python {

// dict (str keys), list, tuple, str, int, float, bool and None; TypeError naming `name` and the
// path to anything else, ValueError for nesting deeper than kMaxJsonDepth (or a cycle).
nlohmann::ordered_json to_json(nanobind::handle value, std::string_view name);

nanobind::object from_json(const nlohmann::ordered_json& value);

}  // namespace nanovllm::python
