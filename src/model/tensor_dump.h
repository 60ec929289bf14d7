// Opt-in dumps of named intermediate tensors, so a script can diff a forward pass layer by
// layer against Hugging Face transformers: with NANOVLLM_DUMP_DIR set, each dump writes
// <dir>/<name>.npy (C order, float32 or int32, with its shape), overwriting earlier files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "kernels/backend.h"

namespace nanovllm {

class TensorDumper {
 public:
  // Dumps into $NANOVLLM_DUMP_DIR; disabled when it is unset or empty.
  explicit TensorDumper(Backend& backend);
  // Dumps into `dir`; disabled when it is empty.
  TensorDumper(Backend& backend, std::filesystem::path dir);

  bool enabled() const { return !dir_.empty(); }
  const std::filesystem::path& dir() const { return dir_; }

  // Downloads `tensor` (f32 or i32, contiguous) and writes <dir>/<name>.npy; no-op when disabled.
  void dump(std::string_view name, const Tensor& tensor);

 private:
  Backend& backend_;
  std::filesystem::path dir_;
  std::vector<char> staging_;  // host copy, reused across dumps
};

// Writes a .npy file (format 1.0, little-endian, C order) of float32 or int32 values.
// Throws Error naming the path when it cannot be written.
void write_npy(const std::filesystem::path& path, DType dtype, const void* data,
               const std::vector<int64_t>& shape);

}  // namespace nanovllm
