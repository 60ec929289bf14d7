// Reading loaded weights back for comparison with what a checkpoint holds.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "fake_backend.h"
#include "model/decoder/decoder_weights.h"
#include "model_test_files.h"

namespace nanovllm::testing {

// A device tensor's values as floats, whatever its floating dtype.
inline std::vector<float> read_floats(FakeBackend& backend, const Tensor& tensor) {
  std::vector<float> values(tensor.numel());
  if (tensor.dtype() == DType::kF32) {
    backend.download(values.data(), tensor);
    return values;
  }
  std::vector<uint16_t> bits = backend.read<uint16_t>(tensor);
  for (size_t i = 0; i < bits.size(); ++i) {
    values[i] = tensor.dtype() == DType::kBF16 ? bf16_to_float(bits[i]) : fp16_to_float(bits[i]);
  }
  return values;
}

inline std::vector<int64_t> shape_of(const Tensor& tensor) {
  std::vector<int64_t> shape;
  for (int d = 0; d < tensor.ndim(); ++d) shape.push_back(tensor.size(d));
  return shape;
}

inline std::vector<float> concat(std::initializer_list<const std::vector<float>*> parts) {
  std::vector<float> result;
  for (const auto* part : parts) result.insert(result.end(), part->begin(), part->end());
  return result;
}

// Expects `weights` to hold exactly `expected` (checkpoint name -> values as loaded), with the
// q|k|v and gate|up rows merged in that order, and the head tied or not as the checkpoint says.
inline void expect_weights_match(FakeBackend& backend, const DecoderWeights& weights,
                                 const std::map<std::string, std::vector<float>>& expected,
                                 int num_layers, bool tied) {
  auto at = [&](const std::string& name) -> const std::vector<float>& {
    auto it = expected.find(name);
    if (it == expected.end()) throw std::runtime_error("no reference tensor " + name);
    return it->second;
  };
  EXPECT_EQ(read_floats(backend, weights.embed_tokens), at("model.embed_tokens.weight"));
  ASSERT_EQ(weights.layers.size(), static_cast<size_t>(num_layers));
  for (int i = 0; i < num_layers; ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const DecoderLayerWeights& layer = weights.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    EXPECT_EQ(read_floats(backend, layer.input_layernorm), at(p + "input_layernorm.weight"));
    EXPECT_EQ(read_floats(backend, layer.qkv_proj),
              concat({&at(p + "self_attn.q_proj.weight"), &at(p + "self_attn.k_proj.weight"),
                      &at(p + "self_attn.v_proj.weight")}));
    EXPECT_EQ(read_floats(backend, layer.q_norm), at(p + "self_attn.q_norm.weight"));
    EXPECT_EQ(read_floats(backend, layer.k_norm), at(p + "self_attn.k_norm.weight"));
    EXPECT_EQ(read_floats(backend, layer.o_proj), at(p + "self_attn.o_proj.weight"));
    EXPECT_EQ(read_floats(backend, layer.post_attention_layernorm),
              at(p + "post_attention_layernorm.weight"));
    EXPECT_EQ(read_floats(backend, layer.gate_up_proj),
              concat({&at(p + "mlp.gate_proj.weight"), &at(p + "mlp.up_proj.weight")}));
    EXPECT_EQ(read_floats(backend, layer.down_proj), at(p + "mlp.down_proj.weight"));
  }
  EXPECT_EQ(read_floats(backend, weights.norm), at("model.norm.weight"));
  if (tied) {
    EXPECT_EQ(weights.lm_head.data(), weights.embed_tokens.data());
  } else {
    EXPECT_NE(weights.lm_head.data(), weights.embed_tokens.data());
    EXPECT_EQ(read_floats(backend, weights.lm_head), at("lm_head.weight"));
  }
}

}  // namespace nanovllm::testing
