// Typed access to request JSON fields that names the field and the expected type on a mismatch
// instead of converting silently (nlohmann's get<int>() wraps 2^32 to 0).
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/json_input.h"

namespace nanovllm {

// An integer JSON value that T holds as it is.
template <typename T>
bool is_integer_of(const nlohmann::ordered_json& value) {
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  return value.is_number_integer() && value.get<int64_t>() >= std::numeric_limits<T>::min() &&
         value.get<int64_t>() <= std::numeric_limits<T>::max();
}

// request[name] as T; throws Error "'name' must be <expected>, got <value>".
template <typename T>
T field_as(const nlohmann::ordered_json& request, const char* name, const char* expected) {
  const nlohmann::ordered_json& value = request.at(name);
  const bool ok = [&] {
    if constexpr (std::is_same_v<T, bool>) return value.is_boolean();
    if constexpr (std::is_integral_v<T>) return is_integer_of<T>(value);
    if constexpr (std::is_floating_point_v<T>) return value.is_number();
    if constexpr (std::is_same_v<T, std::string>) return value.is_string();
    return true;
  }();
  if (!ok) throw Error(fmt::format("'{}' must be {}, got {}", name, expected, json_excerpt(value)));
  return value.get<T>();
}

// A list of 32-bit integers; throws Error naming the field otherwise.
std::vector<int> int_list(const nlohmann::ordered_json& value, const char* name);
// A string or a list of strings; throws Error naming the field otherwise.
std::vector<std::string> string_list(const nlohmann::ordered_json& value, const char* name);

}  // namespace nanovllm
