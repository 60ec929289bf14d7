// Writers for the files of a Hugging Face checkpoint (config.json, safetensors, shard index),
// written here from the format descriptions so the loader's tests need no Python.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace nanovllm::testing {

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

void write_file(const std::filesystem::path& path, std::string_view bytes);
void write_json(const std::filesystem::path& path, const nlohmann::json& value);

// The safetensors name of a dtype: "F32", "F16", "BF16", "I32", "I64".
std::string safetensors_dtype_name(DType dtype);
// Little-endian bytes of `values` stored as `dtype` (F32, F16 or BF16), rounded to nearest even.
std::string encode_floats(const std::vector<float>& values, DType dtype);
// What `value` becomes once stored as `dtype`.
float round_to(DType dtype, float value);

struct TensorData {
  std::string name;
  std::string dtype;  // safetensors dtype name
  std::vector<int64_t> shape;
  std::string bytes;
};
TensorData make_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                       const std::vector<float>& values);

// A safetensors file of `tensors`, data packed in the given order, the header padded with spaces
// to a multiple of 8 bytes as the safetensors library does.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors,
                       const nlohmann::json& metadata = nullptr);
// An arbitrary file in safetensors framing: the 8-byte header length, header text, data.
void write_raw_safetensors(const std::filesystem::path& path, uint64_t header_length,
                           std::string_view header, std::string_view data);
void write_raw_safetensors(const std::filesystem::path& path, std::string_view header,
                           std::string_view data);

// A tiny Qwen3 config.json in the style of the released checkpoints (top-level rope_theta and
// torch_dtype): vocab 40, hidden 16, intermediate 24, 2 layers, 4 heads, 2 kv heads, head_dim 8
// (not hidden / heads), untied.
nlohmann::json tiny_config_json();

struct ReferenceTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // exactly representable in bf16 when made with bf16_exact
};

// Every tensor a Qwen3 checkpoint of `config` holds, shapes spelled out from the Hugging Face
// module definitions, values pseudo-random per tensor (seeded by name and `seed`).
// bf16_exact: values that every float dtype stores exactly, for bit-exact comparisons.
std::vector<ReferenceTensor> qwen3_reference_tensors(const nlohmann::json& config, uint32_t seed,
                                                     bool bf16_exact = false);

// Writes config.json and the tensors: model.safetensors when shards == 1, otherwise `shards`
// files named like transformers names them plus model.safetensors.index.json. Tensor i is stored
// as file_dtypes[i % size].
void write_checkpoint(const std::filesystem::path& dir, const nlohmann::json& config,
                      const std::vector<ReferenceTensor>& tensors,
                      const std::vector<DType>& file_dtypes, int shards);

// How a string contains all of `parts` (for asserting on error messages).
bool contains_all(const std::string& text, const std::vector<std::string>& parts);

// The message of the nanovllm::Error `body` throws, or "<no error>". Other exceptions escape.
std::string error_message(const std::function<void()>& body);

}  // namespace nanovllm::testing

// Expects `statement` to throw a nanovllm::Error whose message contains every string given.
#define EXPECT_ERROR(statement, ...)                                                           \
  do {                                                                                         \
    const std::string nvllm_message_ = ::nanovllm::testing::error_message([&] { statement; }); \
    EXPECT_TRUE(::nanovllm::testing::contains_all(nvllm_message_, {__VA_ARGS__}))              \
        << nvllm_message_;                                                                     \
  } while (0)
