// Methods of str, dict and list values as templates call them (`s.strip()`, `d.items()`).
#pragma once

#include <optional>
#include <string>

#include "jinja/value.h"

namespace nanovllm::jinja {

// The bound method `name` of a str, dict or list. nullopt: Python has no such attribute, so the
// lookup yields Undefined. Mutating methods yield an Undefined that raises when called, as in
// jinja2's immutable sandbox; methods this engine lacks raise a clear error when called.
std::optional<Value> string_method(const Value& self, const std::string& name);
std::optional<Value> dict_method(const Value& self, const std::string& name);
std::optional<Value> list_method(const Value& self, const std::string& name);

// Python's str.join over already-evaluated items (each must be a str).
std::string join_strings(const ValueList& items, const std::string& separator);

}  // namespace nanovllm::jinja
