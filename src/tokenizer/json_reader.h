// Reading fields of a JSON file with errors that name the file and the field.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace nanovllm {

class JsonReader {
 public:
  // Parses the file; throws Error naming it if it cannot be read or is not JSON.
  static nlohmann::json parse_file(const std::filesystem::path& path);

  explicit JsonReader(std::filesystem::path path) : path_(std::move(path)) {}

  [[noreturn]] void fail(std::string_view where, std::string_view problem) const;

  // `where` names the object for messages, e.g. "model" or "pre_tokenizer.pretokenizers[0]".
  const nlohmann::json& object(const nlohmann::json& j, std::string_view where) const;
  const nlohmann::json& array(const nlohmann::json& j, std::string_view where) const;
  const nlohmann::json& field(const nlohmann::json& obj, std::string_view key,
                              std::string_view where) const;
  std::string string(const nlohmann::json& obj, std::string_view key, std::string_view where) const;
  // Absent or null -> nullopt.
  std::optional<std::string> optional_string(const nlohmann::json& obj, std::string_view key,
                                             std::string_view where) const;
  // Absent or null -> fallback.
  bool boolean(const nlohmann::json& obj, std::string_view key, std::string_view where,
               bool fallback) const;
  std::optional<bool> optional_boolean(const nlohmann::json& obj, std::string_view key,
                                       std::string_view where) const;
  int integer(const nlohmann::json& obj, std::string_view key, std::string_view where) const;
  int integer(const nlohmann::json& value, std::string_view where) const;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace nanovllm
