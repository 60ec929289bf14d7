// Converts nlohmann JSON documents into template values (objects keep their key order when the
// document does, as nlohmann::ordered_json does).
#pragma once

#include <nlohmann/json.hpp>

#include "jinja/value.h"

namespace nanovllm::jinja {

// Throws Error for binary values and integers beyond 64 bits.
Value value_from_json(const nlohmann::json& j);
Value value_from_json(const nlohmann::ordered_json& j);

}  // namespace nanovllm::jinja
