#include "jinja/args.h"

#include "jinja/error.h"

namespace nanovllm::jinja {

BoundArgs::BoundArgs(const std::string& function, const CallArgs& args,
                     std::initializer_list<const char*> params, size_t required)
    : function_(function), names_(params.begin(), params.end()) {
  values_.resize(names_.size());
  present_.assign(names_.size(), false);
  if (args.positional.size() > names_.size()) {
    runtime_fail(function + "() takes at most " + std::to_string(names_.size()) + " argument(s) (" +
                 std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) {
    values_[i] = args.positional[i];
    present_[i] = true;
  }
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < names_.size() && names_[i] != key) ++i;
    if (i == names_.size())
      runtime_fail(function + "() got an unexpected keyword argument '" + key + "'");
    if (present_[i]) runtime_fail(function + "() got multiple values for argument '" + key + "'");
    values_[i] = value;
    present_[i] = true;
  }
  for (size_t i = 0; i < required && i < names_.size(); ++i) {
    if (!present_[i]) runtime_fail(function + "() missing required argument '" + names_[i] + "'");
  }
}

std::optional<int64_t> BoundArgs::get_int(size_t i) const {
  if (!present_[i] || values_[i].is_none()) return std::nullopt;
  const Value& v = values_[i];
  if (v.is_int() || v.is_bool()) return v.as_int();
  runtime_fail(function_ + "(): '" + names_[i] + "' must be an integer, not " + v.type_name());
}

std::optional<std::string> BoundArgs::get_string(size_t i) const {
  if (!present_[i] || values_[i].is_none()) return std::nullopt;
  const Value& v = values_[i];
  if (v.is_string()) return v.str();
  runtime_fail(function_ + "(): '" + names_[i] + "' must be a string, not " + v.type_name());
}

bool BoundArgs::get_bool(size_t i, bool fallback) const {
  return present_[i] ? values_[i].truthy() : fallback;
}

}  // namespace nanovllm::jinja
