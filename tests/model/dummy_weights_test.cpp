#include "model/dummy_weights.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/model_config.h"
#include "weight_test_support.h"

namespace nanovllm {
namespace {

using nlohmann::json;
using testing::FakeBackend;
using testing::read_floats;
using testing::shape_of;
using testing::TempDir;

ModelConfig tiny_config(bool tied, int vocab = 40) {
  TempDir dir;
  json config = testing::tiny_config_json();
  config["tie_word_embeddings"] = tied;
  config["vocab_size"] = vocab;
  testing::write_json(dir / "config.json", config);
  return load_model_config(dir.path());
}

DecoderWeights load_dummy(const ModelConfig& config, Backend& backend) {
  TempDir empty;  // no checkpoint needed
  return load_decoder_weights(empty.path(), config, backend, LoadFormat::kDummy);
}

TEST(DummyWeights, ShapesFollowTheConfig) {
  const ModelConfig config = tiny_config(false);
  FakeBackend backend(DType::kBF16);
  const DecoderWeights weights = load_dummy(config, backend);
  using Shape = std::vector<int64_t>;
  EXPECT_EQ(shape_of(weights.embed_tokens), (Shape{40, 16}));
  ASSERT_EQ(weights.layers.size(), 2u);
  for (const DecoderLayerWeights& layer : weights.layers) {
    EXPECT_EQ(shape_of(layer.input_layernorm), (Shape{16}));
    EXPECT_EQ(shape_of(layer.qkv_proj), (Shape{(4 + 2 * 2) * 8, 16}));
    EXPECT_EQ(shape_of(layer.q_norm), (Shape{8}));
    EXPECT_EQ(shape_of(layer.k_norm), (Shape{8}));
    EXPECT_EQ(shape_of(layer.o_proj), (Shape{16, 32}));
    EXPECT_EQ(shape_of(layer.post_attention_layernorm), (Shape{16}));
    EXPECT_EQ(shape_of(layer.gate_up_proj), (Shape{48, 16}));
    EXPECT_EQ(shape_of(layer.down_proj), (Shape{16, 24}));
    EXPECT_EQ(layer.down_proj.dtype(), DType::kBF16);
  }
  EXPECT_EQ(shape_of(weights.norm), (Shape{16}));
  EXPECT_EQ(shape_of(weights.lm_head), (Shape{40, 16}));
  EXPECT_NE(weights.lm_head.data(), weights.embed_tokens.data());
}

TEST(DummyWeights, TiedHeadViewsTheEmbedding) {
  FakeBackend backend(DType::kF32);
  const DecoderWeights weights = load_dummy(tiny_config(true), backend);
  EXPECT_EQ(weights.lm_head.data(), weights.embed_tokens.data());
  EXPECT_EQ(shape_of(weights.lm_head), (std::vector<int64_t>{40, 16}));
}

TEST(DummyWeights, DeterministicAndDistinctPerTensor) {
  const ModelConfig config = tiny_config(false);
  FakeBackend backend(DType::kF32);
  const DecoderWeights a = load_dummy(config, backend);
  const DecoderWeights b = load_dummy(config, backend);
  EXPECT_EQ(read_floats(backend, a.embed_tokens), read_floats(backend, b.embed_tokens));
  EXPECT_EQ(read_floats(backend, a.layers[1].qkv_proj), read_floats(backend, b.layers[1].qkv_proj));
  EXPECT_NE(read_floats(backend, a.layers[0].down_proj),
            read_floats(backend, a.layers[1].down_proj));
  EXPECT_NE(read_floats(backend, a.embed_tokens), read_floats(backend, a.lm_head));
  // Each element is a function of the checkpoint name and index alone.
  const std::vector<float> qkv = read_floats(backend, a.layers[1].qkv_proj);
  EXPECT_EQ(qkv[0], dummy_weight_value("model.layers.1.self_attn.q_proj.weight", 0));
  EXPECT_EQ(qkv[32 * 16 + 5], dummy_weight_value("model.layers.1.self_attn.k_proj.weight", 5));
  EXPECT_EQ(qkv[48 * 16 + 7], dummy_weight_value("model.layers.1.self_attn.v_proj.weight", 7));
}

TEST(DummyWeights, NormGainsAreOneAndOtherWeightsSmall) {
  // A vocabulary large enough that the embedding is filled by several threads.
  const ModelConfig config = tiny_config(false, 40000);
  FakeBackend backend(DType::kF32);
  const DecoderWeights weights = load_dummy(config, backend);
  for (const Tensor* norm :
       {&weights.norm, &weights.layers[0].q_norm, &weights.layers[1].k_norm,
        &weights.layers[0].input_layernorm, &weights.layers[1].post_attention_layernorm}) {
    for (float value : read_floats(backend, *norm)) ASSERT_EQ(value, 1.0f);
  }
  const std::vector<float> embedding = read_floats(backend, weights.embed_tokens);
  double sum = 0, sum_squares = 0;
  float largest = 0;
  for (size_t i = 0; i < embedding.size(); ++i) {
    ASSERT_EQ(embedding[i], dummy_weight_value("model.embed_tokens.weight", i)) << i;
    sum += embedding[i];
    sum_squares += double(embedding[i]) * embedding[i];
    largest = std::max(largest, std::fabs(embedding[i]));
  }
  const double mean = sum / embedding.size();
  const double std = std::sqrt(sum_squares / embedding.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(std, 0.02, 2e-4);
  EXPECT_LE(largest, 0.07f);
}

TEST(DummyWeights, Bf16ComputeHoldsRoundedValues) {
  const ModelConfig config = tiny_config(false);
  FakeBackend backend(DType::kBF16);
  const DecoderWeights weights = load_dummy(config, backend);
  const std::vector<float> down = read_floats(backend, weights.layers[0].down_proj);
  for (size_t i = 0; i < down.size(); ++i) {
    ASSERT_EQ(down[i],
              testing::round_to(DType::kBF16,
                                dummy_weight_value("model.layers.0.mlp.down_proj.weight", i)));
  }
}

}  // namespace
}  // namespace nanovllm
