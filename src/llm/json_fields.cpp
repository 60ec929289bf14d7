#include "llm/json_fields.h"

namespace nanovllm {

std::vector<int> int_list(const nlohmann::ordered_json& value, const char* name) {
  if (!value.is_array()) throw Error(fmt::format("'{}' must be a list of integers", name));
  std::vector<int> ids;
  ids.reserve(value.size());
  for (const auto& item : value) {
    if (!is_integer_of<int>(item)) {
      throw Error(
          fmt::format("'{}' must be a list of integers, found {}", name, json_excerpt(item)));
    }
    ids.push_back(item.get<int>());
  }
  return ids;
}

std::vector<std::string> string_list(const nlohmann::ordered_json& value, const char* name) {
  if (value.is_string()) return {value.get<std::string>()};
  if (!value.is_array())
    throw Error(fmt::format("'{}' must be a string or a list of strings", name));
  std::vector<std::string> strings;
  for (const auto& item : value) {
    if (!item.is_string()) throw Error(fmt::format("'{}' must be a list of strings", name));
    strings.push_back(item.get<std::string>());
  }
  return strings;
}

}  // namespace nanovllm
