// Functions every template can call: range, namespace, dict, and transformers' raise_exception
// and strftime_now.
#pragma once

#include <optional>
#include <string>

#include "jinja/value.h"

namespace nanovllm::jinja {

std::optional<Value> builtin_global(const std::string& name);

}  // namespace nanovllm::jinja
