#include "jinja/json_value.h"

#include <limits>

#include "core/check.h"

namespace nanovllm::jinja {

namespace {

template <typename Json>
Value convert(const Json& j, int depth) {
  if (depth > 500) throw Error("template variable: JSON nested more than 500 levels deep");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw Error("template variable: integer " + std::to_string(u) + " does not fit in 64 bits");
      }
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(convert(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      DictData d;
      d.entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        d.entries.emplace_back(Value(it.key()),
                               convert(it.value(), depth + 1));  // JSON keys are unique
      }
      return Value::dict(std::move(d));
    }
    default:
      throw Error("template variable: binary or discarded JSON values are not supported");
  }
}

}  // namespace

Value value_from_json(const nlohmann::json& j) {
  return convert(j, 0);
}
Value value_from_json(const nlohmann::ordered_json& j) {
  return convert(j, 0);
}

}  // namespace nanovllm::jinja
