// Against files written by the Hugging Face libraries (tests/model/data/make_hf_fixture.py):
// config.json as transformers saves and resolves it, shards and index as safetensors and
// huggingface_hub write them, dtype rounding as ml_dtypes does it.
#include <gtest/gtest.h>

#include <fstream>

#include "model/json_file.h"
#include "model/model_config.h"
#include "weight_test_support.h"

namespace nanovllm {
namespace {

using nlohmann::json;
using testing::FakeBackend;

const std::filesystem::path kData = std::filesystem::path(NANOVLLM_SOURCE_DIR) / "tests/model/data";
const std::filesystem::path kCheckpoint = kData / "tiny-qwen3-hf";

TEST(HfFixture, ConfigSavedByTransformers) {
  const ModelConfig config = load_model_config(kCheckpoint);
  EXPECT_EQ(config.vocab_size, 32);
  EXPECT_EQ(config.hidden_size, 8);
  EXPECT_EQ(config.intermediate_size, 12);
  EXPECT_EQ(config.num_hidden_layers, 2);
  EXPECT_EQ(config.num_attention_heads, 2);
  EXPECT_EQ(config.num_key_value_heads, 1);
  EXPECT_EQ(config.head_dim, 8);
  EXPECT_EQ(config.max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(config.rope_theta, 500000.0);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.torch_dtype, DType::kBF16);
  EXPECT_EQ(config.eos_token_ids, std::vector<int>{3});
  EXPECT_EQ(load_generation_config(kCheckpoint, config).eos_token_ids, (std::vector<int>{3, 4}));
}

class HfFixtureWeights : public ::testing::TestWithParam<DType> {};

TEST_P(HfFixtureWeights, MatchLibraryValuesAfterRounding) {
  const DType compute = GetParam();
  const json expected_json = read_json_file(kData / "tiny-qwen3-hf-expected.json");
  std::map<std::string, std::vector<float>> expected;
  for (const auto& [name, values] : expected_json.at(std::string(dtype_name(compute))).items()) {
    for (double value : values) expected[name].push_back(static_cast<float>(value));
  }
  ASSERT_EQ(expected.size(), 24u);

  const ModelConfig config = load_model_config(kCheckpoint);
  FakeBackend backend(compute);
  const DecoderWeights weights =
      load_decoder_weights(kCheckpoint, config, backend, LoadFormat::kSafetensors);
  testing::expect_weights_match(backend, weights, expected, 2, true);
}

INSTANTIATE_TEST_SUITE_P(Compute, HfFixtureWeights,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// How transformers' Qwen3Config resolves each variant of the released Qwen3-0.6B config.
TEST(HfFixture, ConfigVariantsResolveAsTransformersDoes) {
  const json variants = read_json_file(kData / "config-variants.json");
  ASSERT_GE(variants.size(), 10u);
  for (const json& variant : variants) {
    SCOPED_TRACE(variant.at("label").get<std::string>());
    testing::TempDir dir;
    testing::write_json(dir / "config.json", variant.at("config"));
    const ModelConfig config = load_model_config(dir.path());
    const json& resolved = variant.at("resolved");
    EXPECT_EQ(config.head_dim, resolved.at("head_dim").get<int>());
    EXPECT_EQ(config.num_key_value_heads, resolved.at("num_key_value_heads").get<int>());
    EXPECT_DOUBLE_EQ(config.rope_theta, resolved.at("rope_theta").get<double>());
    EXPECT_EQ(config.tie_word_embeddings, resolved.at("tie_word_embeddings").get<bool>());
    EXPECT_EQ(config.eos_token_ids, resolved.at("eos_token_ids").get<std::vector<int>>());
  }
}

}  // namespace
}  // namespace nanovllm
