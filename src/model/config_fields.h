// Typed access to the fields of a checkpoint's JSON config files: every error names the file
// and the field. The readers of each architecture (model/<family>/) are written with it.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace nanovllm {

class ConfigFields {
 public:
  // Throws Error unless `root` is an object; `root` must outlive this.
  ConfigFields(const nlohmann::json& root, std::filesystem::path file);

  const std::filesystem::path& file() const { return file_; }
  bool present(const std::string& name) const { return root_.contains(name); }
  // The field, or nullptr when it is absent or null (transformers treats both as "not set").
  const nlohmann::json* find(const std::string& name) const;

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const;

  int positive_int(const std::string& name, std::optional<int> fallback = std::nullopt) const;
  int positive_int_value(const std::string& name, const nlohmann::json& value) const;
  double positive_number(const std::string& name, const nlohmann::json& value) const;
  bool boolean(const std::string& name, bool fallback) const;
  std::string string(const std::string& name, const std::string& fallback) const;
  // A token id or a list of them (eos_token_id).
  std::vector<int> token_ids(const std::string& name, const nlohmann::json& value) const;
  // "torch_dtype" or, as newer transformers write it, "dtype"; bfloat16 when neither is set.
  DType torch_dtype() const;

 private:
  const nlohmann::json& root_;
  std::filesystem::path file_;
};

}  // namespace nanovllm
