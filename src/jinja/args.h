// Binds call arguments to named parameters the way Python does, for builtin filters, tests,
// functions and methods.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace nanovllm::jinja {

class BoundArgs {
 public:
  // Throws RuntimeFailure for too many positional arguments, unknown or repeated keywords.
  BoundArgs(const std::string& function, const CallArgs& args,
            std::initializer_list<const char*> params, size_t required = 0);

  bool has(size_t i) const { return present_[i]; }
  // The argument, or Undefined when it was not passed.
  const Value& get(size_t i) const { return values_[i]; }
  Value get_or(size_t i, Value fallback) const { return present_[i] ? values_[i] : fallback; }

  // Typed accessors; nullopt when absent or None. Throw on a wrong type.
  std::optional<int64_t> get_int(size_t i) const;
  std::optional<std::string> get_string(size_t i) const;
  bool get_bool(size_t i, bool fallback) const;

 private:
  std::string function_;
  std::vector<std::string> names_;
  std::vector<Value> values_;
  std::vector<bool> present_;
};

}  // namespace nanovllm::jinja
