// Python's json.dumps over template values, as transformers' `tojson` filter calls it.
#pragma once

#include <optional>
#include <string>

#include "jinja/value.h"

namespace nanovllm::jinja {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // None: single line; "" from indent=0 still breaks lines
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// Throws RuntimeFailure for values JSON cannot hold (Undefined, functions, generators...).
std::string json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace nanovllm::jinja
