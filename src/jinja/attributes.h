// `obj.name`, `obj[key]` and `obj[a:b:c]` with jinja2's sandboxed lookup rules: attributes
// (methods) before keys for `.`, keys before attributes for `[]`, Undefined for misses, and an
// error only when the object itself is undefined.
#pragma once

#include <optional>
#include <string>

#include "jinja/value.h"

namespace nanovllm::jinja {

Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace nanovllm::jinja
