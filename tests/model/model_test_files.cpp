#include "model_test_files.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

#include "core/check.h"

namespace nanovllm::testing {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "nanovllm-model-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!stream) throw std::runtime_error("cannot write " + path.string());
}

void write_json(const std::filesystem::path& path, const nlohmann::json& value) {
  write_file(path, value.dump(2));
}

std::string safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
  }
  return "?";
}

std::string encode_floats(const std::vector<float>& values, DType dtype) {
  std::string bytes;
  for (float value : values) {
    if (dtype == DType::kF32) {
      char raw[4];
      std::memcpy(raw, &value, 4);
      bytes.append(raw, 4);
    } else {
      const uint16_t bits = dtype == DType::kBF16 ? float_to_bf16(value) : float_to_fp16(value);
      bytes.push_back(static_cast<char>(bits & 0xff));
      bytes.push_back(static_cast<char>(bits >> 8));
    }
  }
  return bytes;
}

float round_to(DType dtype, float value) {
  if (dtype == DType::kBF16) return bf16_to_float(float_to_bf16(value));
  if (dtype == DType::kF16) return fp16_to_float(float_to_fp16(value));
  return value;
}

TensorData make_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                       const std::vector<float>& values) {
  return {name, safetensors_dtype_name(dtype), std::move(shape), encode_floats(values, dtype)};
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors,
                       const nlohmann::json& metadata) {
  // ordered_json keeps the header in the order given, as a real writer might.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  std::string data;
  for (const TensorData& tensor : tensors) {
    const size_t begin = data.size();
    data += tensor.bytes;
    header[tensor.name] = {
        {"dtype", tensor.dtype}, {"shape", tensor.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  write_raw_safetensors(path, text, data);
}

void write_raw_safetensors(const std::filesystem::path& path, uint64_t header_length,
                           std::string_view header, std::string_view data) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header_length >> (8 * i)) & 0xff));
  bytes += header;
  bytes += data;
  write_file(path, bytes);
}

void write_raw_safetensors(const std::filesystem::path& path, std::string_view header,
                           std::string_view data) {
  write_raw_safetensors(path, header.size(), header, data);
}

nlohmann::json tiny_config_json() {
  return {
      {"architectures", {"Qwen3ForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"head_dim", 8},
      {"hidden_act", "silu"},
      {"hidden_size", 16},
      {"initializer_range", 0.02},
      {"intermediate_size", 24},
      {"max_position_embeddings", 128},
      {"max_window_layers", 2},
      {"model_type", "qwen3"},
      {"num_attention_heads", 4},
      {"num_hidden_layers", 2},
      {"num_key_value_heads", 2},
      {"rms_norm_eps", 1e-06},
      {"rope_scaling", nullptr},
      {"rope_theta", 1000000},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "4.51.0"},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", 40},
  };
}

std::vector<ReferenceTensor> qwen3_reference_tensors(const nlohmann::json& config, uint32_t seed,
                                                     bool bf16_exact) {
  const int64_t vocab = config["vocab_size"];
  const int64_t hidden = config["hidden_size"];
  const int64_t intermediate = config["intermediate_size"];
  const int64_t layers = config["num_hidden_layers"];
  const int64_t heads = config["num_attention_heads"];
  const int64_t kv_heads = config["num_key_value_heads"];
  const int64_t head_dim = config["head_dim"];
  const bool tied = config.value("tie_word_embeddings", false);

  // transformers' Qwen3 modules: nn.Linear(in, out).weight is [out, in]; RMSNorm(n) is [n].
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  shapes.push_back({"model.embed_tokens.weight", {vocab, hidden}});
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    shapes.push_back({p + "input_layernorm.weight", {hidden}});
    shapes.push_back({p + "self_attn.q_proj.weight", {heads * head_dim, hidden}});
    shapes.push_back({p + "self_attn.k_proj.weight", {kv_heads * head_dim, hidden}});
    shapes.push_back({p + "self_attn.v_proj.weight", {kv_heads * head_dim, hidden}});
    shapes.push_back({p + "self_attn.o_proj.weight", {hidden, heads * head_dim}});
    shapes.push_back({p + "self_attn.q_norm.weight", {head_dim}});
    shapes.push_back({p + "self_attn.k_norm.weight", {head_dim}});
    shapes.push_back({p + "post_attention_layernorm.weight", {hidden}});
    shapes.push_back({p + "mlp.gate_proj.weight", {intermediate, hidden}});
    shapes.push_back({p + "mlp.up_proj.weight", {intermediate, hidden}});
    shapes.push_back({p + "mlp.down_proj.weight", {hidden, intermediate}});
  }
  shapes.push_back({"model.norm.weight", {hidden}});
  if (!tied) shapes.push_back({"lm_head.weight", {vocab, hidden}});

  std::vector<ReferenceTensor> tensors;
  for (auto& [name, shape] : shapes) {
    std::seed_seq seeds(name.begin(), name.end());
    std::mt19937 generator(seeds);
    generator.discard(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    int64_t count = 1;
    for (int64_t extent : shape) count *= extent;
    std::vector<float> values(count);
    for (float& value : values) {
      value = normal(generator);
      // 4 significant bits and a small exponent: exact in bf16, fp16 and fp32.
      if (bf16_exact) value = std::ldexp(std::round(std::ldexp(value, 3)), -3);
    }
    tensors.push_back({name, shape, std::move(values)});
  }
  return tensors;
}

void write_checkpoint(const std::filesystem::path& dir, const nlohmann::json& config,
                      const std::vector<ReferenceTensor>& tensors,
                      const std::vector<DType>& file_dtypes, int shards) {
  write_json(dir / "config.json", config);
  std::vector<std::vector<TensorData>> files(shards);
  nlohmann::json weight_map = nlohmann::json::object();
  const size_t per_shard = (tensors.size() + shards - 1) / shards;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ReferenceTensor& tensor = tensors[i];
    const size_t shard = i / per_shard;
    files[shard].push_back(
        make_tensor(tensor.name, file_dtypes[i % file_dtypes.size()], tensor.shape, tensor.values));
    weight_map[tensor.name] = fmt::format("model-{:05d}-of-{:05d}.safetensors", shard + 1, shards);
  }
  if (shards == 1) {
    write_safetensors(dir / "model.safetensors", files[0]);
    return;
  }
  for (int shard = 0; shard < shards; ++shard) {
    write_safetensors(dir / fmt::format("model-{:05d}-of-{:05d}.safetensors", shard + 1, shards),
                      files[shard]);
  }
  write_json(dir / "model.safetensors.index.json",
             {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}});
}

bool contains_all(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    if (text.find(part) == std::string::npos) return false;
  }
  return true;
}

std::string error_message(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    // Set NANOVLLM_TEST_PRINT_ERRORS to review the wording of every expected error.
    if (std::getenv("NANOVLLM_TEST_PRINT_ERRORS"))
      std::fprintf(stderr, "error: %s\n", error.what());
    return error.what();
  }
  return "<no error>";
}

}  // namespace nanovllm::testing
