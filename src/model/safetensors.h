// Safetensors checkpoints, memory-mapped read-only and validated before any byte is used:
// a single model.safetensors, or the shards listed in model.safetensors.index.json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "model/mapped_file.h"

namespace nanovllm {

// The dtypes accepted in headers: BF16, F16, F32, I32, I64; nullopt for any other name.
std::optional<DType> parse_safetensors_dtype(std::string_view name);

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // inside the file mapping; not necessarily aligned
  size_t nbytes = 0;
  std::filesystem::path file;  // the file holding it, for error messages

  int64_t numel() const;
  std::string shape_string() const;  // "[3, 4]"
};

class SafetensorsFile {
 public:
  // Maps and validates `path`; any malformation is an Error naming the file and the problem.
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return mapping_.path(); }
  // By name.
  const std::map<std::string, SafetensorsTensor, std::less<>>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile mapping_;
  std::map<std::string, SafetensorsTensor, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

class SafetensorsCheckpoint {
 public:
  static constexpr const char* kSingleFileName = "model.safetensors";
  static constexpr const char* kIndexFileName = "model.safetensors.index.json";

  // model_dir/model.safetensors when present (as transformers prefers it), otherwise the shards
  // of model_dir/model.safetensors.index.json. Every shard must hold exactly the tensors the
  // index maps to it.
  static SafetensorsCheckpoint open(const std::filesystem::path& model_dir);

  // The single file or the index file: what error messages about the whole checkpoint name.
  const std::filesystem::path& source() const { return source_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // Every tensor of the checkpoint by name.
  const std::map<std::string, const SafetensorsTensor*, std::less<>>& tensors() const {
    return tensors_;
  }
  const SafetensorsTensor* find(std::string_view name) const;

 private:
  static SafetensorsCheckpoint open_sharded(const std::filesystem::path& index_path);

  std::filesystem::path source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsTensor*, std::less<>> tensors_;
};

}  // namespace nanovllm
