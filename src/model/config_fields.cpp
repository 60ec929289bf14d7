#include "model/config_fields.h"

#include <climits>
#include <cmath>

#include "core/check.h"
#include "core/json_input.h"

namespace nanovllm {

using nlohmann::json;

ConfigFields::ConfigFields(const json& root, std::filesystem::path file)
    : root_(root), file_(std::move(file)) {
  if (!root_.is_object()) fail("", "the file must hold a JSON object");
}

const json* ConfigFields::find(const std::string& name) const {
  auto it = root_.find(name);
  if (it == root_.end() || it->is_null()) return nullptr;
  return &*it;
}

void ConfigFields::fail(const std::string& field, const std::string& problem) const {
  if (field.empty()) throw Error(fmt::format("{}: {}", file_.string(), problem));
  throw Error(fmt::format("{}: field '{}' {}", file_.string(), field, problem));
}

int ConfigFields::positive_int(const std::string& name, std::optional<int> fallback) const {
  const json* value = find(name);
  if (value == nullptr) {
    if (fallback) return *fallback;
    fail(name, "is required (a positive integer) but missing");
  }
  return positive_int_value(name, *value);
}

int ConfigFields::positive_int_value(const std::string& name, const json& value) const {
  // Parsed non-negative integers are unsigned, negative ones signed.
  const bool positive = value.is_number_unsigned()
                            ? value.get<uint64_t>() > 0
                            : value.is_number_integer() && value.get<int64_t>() > 0;
  if (!positive) fail(name, fmt::format("must be a positive integer, got {}", json_excerpt(value)));
  if (value.get<uint64_t>() > INT_MAX) {
    fail(name, fmt::format("is too large ({}; at most 2^31 - 1)", json_excerpt(value)));
  }
  return value.get<int>();
}

double ConfigFields::positive_number(const std::string& name, const json& value) const {
  if (!value.is_number() || !(value.get<double>() > 0.0) || !std::isfinite(value.get<double>())) {
    fail(name, fmt::format("must be a positive number, got {}", json_excerpt(value)));
  }
  return value.get<double>();
}

bool ConfigFields::boolean(const std::string& name, bool fallback) const {
  const json* value = find(name);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) {
    fail(name, fmt::format("must be true or false, got {}", json_excerpt(*value)));
  }
  return value->get<bool>();
}

std::string ConfigFields::string(const std::string& name, const std::string& fallback) const {
  const json* value = find(name);
  if (value == nullptr) return fallback;
  if (!value->is_string())
    fail(name, fmt::format("must be a string, got {}", json_excerpt(*value)));
  return value->get<std::string>();
}

std::vector<int> ConfigFields::token_ids(const std::string& name, const json& value) const {
  auto as_id = [&](const json& item) {
    if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() > INT_MAX) {
      fail(name,
           fmt::format("must be a token id or a list of token ids, got {}", json_excerpt(value)));
    }
    return item.get<int>();
  };
  std::vector<int> ids;
  if (value.is_array()) {
    for (const json& item : value) ids.push_back(as_id(item));
  } else {
    ids.push_back(as_id(value));
  }
  return ids;
}

DType ConfigFields::torch_dtype() const {
  for (const char* name : {"dtype", "torch_dtype"}) {
    if (find(name) == nullptr) continue;
    const std::string text = string(name, "");
    if (text == "bfloat16") return DType::kBF16;
    if (text == "float16") return DType::kF16;
    if (text == "float32") return DType::kF32;
    fail(name, fmt::format("must be \"bfloat16\", \"float16\" or \"float32\", got \"{}\"", text));
  }
  return DType::kBF16;
}

}  // namespace nanovllm
