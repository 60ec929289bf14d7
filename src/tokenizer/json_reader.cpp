#include "tokenizer/json_reader.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "core/check.h"
#include "core/json_input.h"

namespace nanovllm {

using nlohmann::json;

json JsonReader::parse_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open file", path.string()));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("{}: cannot read file", path.string()));
  try {
    return parse_json<json>(buffer.str());
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path.string(), e.what()));
  }
}

void JsonReader::fail(std::string_view where, std::string_view problem) const {
  throw Error(fmt::format("{}: {}: {}", path_.string(), where, problem));
}

const json& JsonReader::object(const json& j, std::string_view where) const {
  if (!j.is_object()) fail(where, fmt::format("expected an object, got {}", j.type_name()));
  return j;
}

const json& JsonReader::array(const json& j, std::string_view where) const {
  if (!j.is_array()) fail(where, fmt::format("expected an array, got {}", j.type_name()));
  return j;
}

const json& JsonReader::field(const json& obj, std::string_view key, std::string_view where) const {
  object(obj, where);
  const auto it = obj.find(key);
  if (it == obj.end()) fail(where, fmt::format("missing field '{}'", key));
  return *it;
}

std::string JsonReader::string(const json& obj, std::string_view key,
                               std::string_view where) const {
  const json& v = field(obj, key, where);
  if (!v.is_string()) {
    fail(where, fmt::format("field '{}' must be a string, got {}", key, v.type_name()));
  }
  return v.get<std::string>();
}

std::optional<std::string> JsonReader::optional_string(const json& obj, std::string_view key,
                                                       std::string_view where) const {
  object(obj, where);
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) {
    fail(where, fmt::format("field '{}' must be a string, got {}", key, it->type_name()));
  }
  return it->get<std::string>();
}

bool JsonReader::boolean(const json& obj, std::string_view key, std::string_view where,
                         bool fallback) const {
  return optional_boolean(obj, key, where).value_or(fallback);
}

std::optional<bool> JsonReader::optional_boolean(const json& obj, std::string_view key,
                                                 std::string_view where) const {
  object(obj, where);
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) {
    fail(where, fmt::format("field '{}' must be true or false, got {}", key, it->type_name()));
  }
  return it->get<bool>();
}

int JsonReader::integer(const json& obj, std::string_view key, std::string_view where) const {
  return integer(field(obj, key, where), fmt::format("{}.{}", where, key));
}

int JsonReader::integer(const json& value, std::string_view where) const {
  if (!value.is_number_integer()) {
    fail(where, fmt::format("expected an integer, got {}", value.type_name()));
  }
  const auto v = value.get<int64_t>();
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    fail(where, fmt::format("integer {} is out of range", v));
  }
  return static_cast<int>(v);
}

}  // namespace nanovllm
