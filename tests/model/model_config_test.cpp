#include "model/model_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>

#include "model/decoder/decoder_weights.h"
#include "model_test_files.h"

namespace nanovllm {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::tiny_config_json;
using testing::write_file;
using testing::write_json;

// A released model's config.json, from tests/data/configs/<name> (where the GPU checks find the
// shapes they benchmark with dummy weights too).
std::string released_config(const std::string& name) {
  std::ifstream file(std::string(NANOVLLM_TEST_DATA_DIR) + "/configs/" + name + "/config.json");
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// config.json of Qwen/Qwen3-0.6B as released (written by transformers 4.51).
const std::string kQwen3_0_6B = released_config("qwen3-0.6b");
// config.json of Qwen/Qwen2.5-7B-Instruct as released.
const std::string kQwen25_7B = released_config("qwen2.5-7b-instruct");
// config.json of meta-llama/Llama-3.1-8B-Instruct as released.
const std::string kLlama31_8B = released_config("llama-3.1-8b-instruct");
// config.json of Qwen/Qwen3-30B-A3B as released.
const std::string kQwen3_30B_A3B = released_config("qwen3-30b-a3b");
ModelConfig load(const json& config, const TempDir& dir) {
  write_json(dir / "config.json", config);
  return load_model_config(dir.path());
}

TEST(ModelConfig, ReadsReleasedQwen3Config) {
  TempDir dir;
  write_file(dir / "config.json", kQwen3_0_6B);
  const ModelConfig config = load_model_config(dir.path());
  EXPECT_EQ(config.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(config.model_type, "qwen3");
  EXPECT_EQ(config.vocab_size, 151936);
  EXPECT_EQ(config.hidden_size, 1024);
  EXPECT_EQ(config.intermediate_size, 3072);
  EXPECT_EQ(config.num_hidden_layers, 28);
  EXPECT_EQ(config.num_attention_heads, 16);
  EXPECT_EQ(config.num_key_value_heads, 8);
  EXPECT_EQ(config.head_dim, 128);  // not 1024 / 16
  EXPECT_DOUBLE_EQ(config.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(config.rope_theta, 1e6);
  EXPECT_EQ(config.max_position_embeddings, 40960);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.torch_dtype, DType::kBF16);
  EXPECT_EQ(config.eos_token_ids, std::vector<int>{151645});
}

// Newer transformers move rope_theta into rope_parameters and rename torch_dtype to dtype.
TEST(ModelConfig, ReadsReleasedQwen25Config) {
  TempDir dir;
  write_file(dir / "config.json", kQwen25_7B);
  const ModelConfig config = load_model_config(dir.path());
  EXPECT_EQ(config.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(config.head_dim, 128);  // hidden / heads
  EXPECT_TRUE(config.qkv_bias);
  EXPECT_FALSE(config.qk_norm);
  EXPECT_FALSE(config.rope_scaling.enabled);
  EXPECT_EQ(config.rope_theta, 1000000.0);
  EXPECT_EQ(config.num_key_value_heads, 4);
}

TEST(ModelConfig, ReadsReleasedLlama31ConfigWithItsRopeScaling) {
  TempDir dir;
  write_file(dir / "config.json", kLlama31_8B);
  const ModelConfig config = load_model_config(dir.path());
  EXPECT_EQ(config.architecture, "LlamaForCausalLM");
  EXPECT_EQ(config.head_dim, 128);
  EXPECT_FALSE(config.qkv_bias);
  EXPECT_FALSE(config.qk_norm);
  EXPECT_EQ(config.rope_theta, 500000.0);
  EXPECT_TRUE(config.rope_scaling.enabled);
  EXPECT_EQ(config.rope_scaling.factor, 8.0);
  EXPECT_EQ(config.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(config.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(config.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(config.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
}

TEST(ModelConfig, ReadsReleasedQwen3MoeConfig) {
  TempDir dir;
  write_file(dir / "config.json", kQwen3_30B_A3B);
  const ModelConfig config = load_model_config(dir.path());
  EXPECT_EQ(config.architecture, "Qwen3MoeForCausalLM");
  EXPECT_TRUE(config.qk_norm);
  EXPECT_EQ(config.head_dim, 128);
  EXPECT_EQ(config.moe.experts, 128);
  EXPECT_EQ(config.moe.experts_per_token, 8);
  EXPECT_EQ(config.moe.expert_intermediate, 768);
  EXPECT_TRUE(config.moe.normalize_weights);
  for (int layer : {0, 1, 47}) EXPECT_TRUE(config.moe.is_sparse(layer)) << layer;
}

// transformers 5 writes num_local_experts and rope_parameters; mlp_only_layers and
// decoder_sparse_step choose the layers with experts as transformers chooses them.
TEST(ModelConfig, ReadsExpertFieldsInEitherDialectAndTheSparseLayers) {
  TempDir dir;
  json config = json::parse(kQwen3_30B_A3B);
  config["num_local_experts"] = config["num_experts"];
  config.erase("num_experts");
  config.erase("rope_theta");
  config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
  config["mlp_only_layers"] = {0, 5};
  config["decoder_sparse_step"] = 2;
  config.erase("norm_topk_prob");  // transformers' default: false
  const ModelConfig read = load(config, dir);
  EXPECT_EQ(read.moe.experts, 128);
  EXPECT_EQ(read.rope_theta, 5e5);
  EXPECT_FALSE(read.moe.normalize_weights);
  std::vector<int> sparse;
  for (int layer = 0; layer < 12; ++layer) {
    if (read.moe.is_sparse(layer)) sparse.push_back(layer);
  }
  EXPECT_EQ(sparse, (std::vector<int>{1, 3, 7, 9, 11}));
  // The dense families have no experts.
  write_file(dir / "config.json", kQwen3_0_6B);
  EXPECT_FALSE(load_model_config(dir.path()).moe.enabled());
}

// Every rank holds every expert, a slice of its columns.
TEST(ModelConfig, EachExpertSplitsByColumnsOverTheRanks) {
  TempDir dir;
  json config = json::parse(kQwen3_30B_A3B);
  const DecoderShard shard = DecoderShard::of(load(config, dir), {3, 4});
  EXPECT_EQ(shard.expert_intermediate, 192);
  config["moe_intermediate_size"] = 100;
  EXPECT_TRUE(testing::contains_all(testing::error_message([&] {
                                      DecoderShard::of(load(config, dir), {0, 8});
                                    }),
                                    {"each expert's 100 MLP columns do not split over 8 ranks"}));
}

TEST(ModelConfig, RefusesExpertFieldsItCannotUse) {
  const auto error_of = [](const std::function<void(json&)>& change) {
    TempDir dir;
    json config = json::parse(kQwen3_30B_A3B);
    change(config);
    return testing::error_message([&] { load(config, dir); });
  };
  EXPECT_TRUE(testing::contains_all(error_of([](json& c) { c.erase("num_experts"); }),
                                    {"'num_experts'", "num_local_experts", "missing"}));
  EXPECT_TRUE(testing::contains_all(error_of([](json& c) { c["num_experts_per_tok"] = 129; }),
                                    {"'num_experts_per_tok'", "129", "128 experts"}));
  EXPECT_TRUE(testing::contains_all(error_of([](json& c) { c.erase("moe_intermediate_size"); }),
                                    {"'moe_intermediate_size'"}));
  EXPECT_TRUE(testing::contains_all(error_of([](json& c) {
                                      c["mlp_only_layers"] = {3, 48};
                                    }),
                                    {"'mlp_only_layers'", "48", "[0, 48)"}));
  EXPECT_TRUE(testing::contains_all(error_of([](json& c) { c["mlp_only_layers"] = 3; }),
                                    {"'mlp_only_layers'", "must be a list"}));
  EXPECT_TRUE(testing::contains_all(error_of([](json& c) { c["decoder_sparse_step"] = 0; }),
                                    {"'decoder_sparse_step'"}));
}

// What only Llama may have is refused elsewhere, and what none implements everywhere.
TEST(ModelConfig, RefusesWhatTheFamilyDoesNotImplement) {
  const auto error_of = [](const std::string& text, const std::function<void(json&)>& change) {
    TempDir dir;
    json config = json::parse(text);
    change(config);
    return testing::error_message([&] { load(config, dir); });
  };
  const auto llama3 = [](json& c) {
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 8192}};
  };
  EXPECT_TRUE(
      testing::contains_all(error_of(kQwen25_7B, llama3), {"'rope_scaling.rope_type'", "llama3"}));
  EXPECT_TRUE(
      testing::contains_all(error_of(kQwen25_7B, [](json& c) { c["use_sliding_window"] = true; }),
                            {"'use_sliding_window'", "sliding-window"}));
  EXPECT_TRUE(testing::contains_all(
      error_of(kLlama31_8B, [](json& c) { c["rope_scaling"]["rope_type"] = "yarn"; }),
      {"'rope_scaling.rope_type'", "yarn", "llama3"}));
  EXPECT_TRUE(testing::contains_all(
      error_of(kLlama31_8B, [](json& c) { c["rope_scaling"].erase("low_freq_factor"); }),
      {"'rope_scaling.low_freq_factor'", "missing"}));
  EXPECT_TRUE(testing::contains_all(
      error_of(kLlama31_8B, [](json& c) { c["rope_scaling"]["high_freq_factor"] = 0.5; }),
      {"'rope_scaling.high_freq_factor'", "low_freq_factor"}));
  EXPECT_TRUE(testing::contains_all(error_of(kLlama31_8B, [](json& c) { c["mlp_bias"] = true; }),
                                    {"'mlp_bias'"}));
  EXPECT_TRUE(testing::contains_all(
      error_of(kLlama31_8B, [](json& c) { c["attention_bias"] = true; }), {"'attention_bias'"}));
}

TEST(ModelConfig, ReadsNewerTransformersStyle) {
  TempDir dir;
  json config = tiny_config_json();
  config.erase("rope_theta");
  config.erase("rope_scaling");
  config.erase("torch_dtype");
  config["rope_parameters"] = {{"rope_theta", 5000000.0}, {"rope_type", "default"}};
  config["dtype"] = "float32";
  config["layer_types"] = {"full_attention", "full_attention"};
  const ModelConfig loaded = load(config, dir);
  EXPECT_DOUBLE_EQ(loaded.rope_theta, 5e6);
  EXPECT_EQ(loaded.torch_dtype, DType::kF32);
}

TEST(ModelConfig, RopeParametersWinOverTopLevelTheta) {
  TempDir dir;
  json config = tiny_config_json();
  config["rope_theta"] = 1000;
  config["rope_parameters"] = {{"rope_theta", 2000}, {"rope_type", "default"}};
  EXPECT_DOUBLE_EQ(load(config, dir).rope_theta, 2000);
}

TEST(ModelConfig, RopeThetaDefaultsTo10000) {
  TempDir dir;
  json config = tiny_config_json();
  config.erase("rope_theta");
  EXPECT_DOUBLE_EQ(load(config, dir).rope_theta, 10000);
}

TEST(ModelConfig, DtypeWinsOverTorchDtype) {
  TempDir dir;
  json config = tiny_config_json();
  config["dtype"] = "float16";
  EXPECT_EQ(load(config, dir).torch_dtype, DType::kF16);
}

TEST(ModelConfig, TieWordEmbeddingsDefaultsToFalse) {
  TempDir dir;
  json config = tiny_config_json();
  config["tie_word_embeddings"] = true;
  EXPECT_TRUE(load(config, dir).tie_word_embeddings);
  config.erase("tie_word_embeddings");
  EXPECT_FALSE(load(config, dir).tie_word_embeddings);  // transformers' Qwen3Config default
}

TEST(ModelConfig, HeadDimMayDifferFromHiddenOverHeads) {
  TempDir dir;
  json config = tiny_config_json();
  config["head_dim"] = 64;
  EXPECT_EQ(load(config, dir).head_dim, 64);
  // Without the field transformers' Qwen3Config uses 128, whatever hidden / heads is.
  config.erase("head_dim");
  EXPECT_EQ(load(config, dir).head_dim, 128);
}

// As in transformers, null means one kv head per query head; absent would make transformers
// use Qwen3-8B's 32, which we refuse to guess (see the rejections below).
TEST(ModelConfig, NullKvHeadsMeanOnePerQueryHead) {
  TempDir dir;
  json config = tiny_config_json();
  config["num_key_value_heads"] = nullptr;
  EXPECT_EQ(load(config, dir).num_key_value_heads, 4);
}

TEST(ModelConfig, EosTokenIdIntListOrAbsent) {
  TempDir dir;
  json config = tiny_config_json();
  config["eos_token_id"] = 7;
  EXPECT_EQ(load(config, dir).eos_token_ids, std::vector<int>{7});
  config["eos_token_id"] = {7, 9};
  EXPECT_EQ(load(config, dir).eos_token_ids, (std::vector<int>{7, 9}));
  config["eos_token_id"] = nullptr;
  EXPECT_TRUE(load(config, dir).eos_token_ids.empty());
  config.erase("eos_token_id");
  EXPECT_TRUE(load(config, dir).eos_token_ids.empty());
}

TEST(ModelConfig, AcceptsExplicitDefaultRope) {
  TempDir dir;
  json config = tiny_config_json();
  config["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_DOUBLE_EQ(load(config, dir).rope_theta, 1e6);
  config["rope_scaling"] = {{"type", "default"}, {"rope_theta", 300}};
  EXPECT_DOUBLE_EQ(load(config, dir).rope_theta, 300);
}

// Each case: a change to a valid config, and the field the error must name.
struct Rejection {
  std::string label;
  std::function<void(json&)> change;
  std::vector<std::string> message_parts;
};
void PrintTo(const Rejection& value, std::ostream* os) {
  *os << value.label;
}

class ModelConfigRejects : public ::testing::TestWithParam<Rejection> {};

TEST(ModelConfig, WithoutArchitecturesTheModelTypeChooses) {
  TempDir dir;
  json config = testing::tiny_config_json();
  config.erase("architectures");
  EXPECT_EQ(load(config, dir).architecture, "Qwen3ForCausalLM");
}

TEST_P(ModelConfigRejects, NamingFileAndField) {
  TempDir dir;
  json config = tiny_config_json();
  GetParam().change(config);
  write_json(dir / "config.json", config);
  std::vector<std::string> parts = GetParam().message_parts;
  parts.push_back((dir / "config.json").string());
  const std::string message = testing::error_message([&] { load_model_config(dir.path()); });
  EXPECT_TRUE(testing::contains_all(message, parts)) << message;
}

std::vector<Rejection> rejections() {
  std::vector<Rejection> cases = {
      {"OtherModelType", [](json& c) { c["model_type"] = "llama"; }, {"'model_type'", "llama"}},
      {"MissingModelType", [](json& c) { c.erase("model_type"); }, {"'model_type'", "missing"}},
      // The architecture comes from the registry: others are named, with the ones served.
      {"UnknownArchitecture",
       [](json& c) { c["architectures"] = {"MistralForCausalLM"}; },
       {"'architectures'", "MistralForCausalLM", "Qwen3ForCausalLM", "LlamaForCausalLM"}},
      {"ArchitecturesNotAList",
       [](json& c) { c["architectures"] = "Qwen3ForCausalLM"; },
       {"'architectures'", "list"}},
      {"UnknownModelTypeWithoutArchitectures",
       [](json& c) {
         c.erase("architectures");
         c["model_type"] = "mistral";
       },
       {"'model_type'", "mistral", "Qwen3ForCausalLM", "Qwen2ForCausalLM"}},
      {"NeitherArchitecturesNorModelType",
       [](json& c) {
         c.erase("architectures");
         c.erase("model_type");
       },
       {"'model_type'", "missing"}},
      {"YarnRopeScaling",
       [](json& c) {
         c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
       },
       {"'rope_scaling.rope_type'", "yarn"}},
      {"LegacyLinearRopeScaling",
       [](json& c) {
         c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
       },
       {"'rope_scaling.type'", "linear"}},
      {"RopeParametersScaling",
       [](json& c) {
         c["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 1e6}};
       },
       {"'rope_parameters.rope_type'", "dynamic"}},
      {"PartialRotary",
       [](json& c) {
         c["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}};
       },
       {"'rope_parameters.partial_rotary_factor'"}},
      {"PerLayerTypeRope",
       [](json& c) {
         c["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}}};
       },
       {"'rope_parameters.full_attention'"}},
      {"RopeScalingNotObject", [](json& c) { c["rope_scaling"] = 2; }, {"'rope_scaling'"}},
      {"SlidingWindow", [](json& c) { c["use_sliding_window"] = true; }, {"'use_sliding_window'"}},
      {"SlidingLayerTypes",
       [](json& c) {
         c["layer_types"] = {"full_attention", "sliding_attention"};
       },
       {"'layer_types'", "sliding_attention"}},
      {"AttentionBias", [](json& c) { c["attention_bias"] = true; }, {"'attention_bias'"}},
      {"AttentionBiasNotBool", [](json& c) { c["attention_bias"] = "no"; }, {"'attention_bias'"}},
      {"GeluActivation", [](json& c) { c["hidden_act"] = "gelu"; }, {"'hidden_act'", "gelu"}},
      {"Quantized",
       [](json& c) {
         c["quantization_config"] = {{"quant_method", "fp8"}};
       },
       {"'quantization_config'"}},
      {"HeadsNotMultipleOfKvHeads",
       [](json& c) {
         c["num_attention_heads"] = 6;
         c["num_key_value_heads"] = 4;
       },
       {"'num_attention_heads'", "num_key_value_heads", "6", "4"}},
      {"UnknownTorchDtype",
       [](json& c) { c["torch_dtype"] = "float64"; },
       {"'torch_dtype'", "float64"}},
      {"NegativeEos",
       [](json& c) {
         c["eos_token_id"] = {2, -1};
       },
       {"'eos_token_id'"}},
      {"StringEos", [](json& c) { c["eos_token_id"] = "2"; }, {"'eos_token_id'"}},
      {"ZeroEps", [](json& c) { c["rms_norm_eps"] = 0; }, {"'rms_norm_eps'"}},
      {"NegativeRopeTheta", [](json& c) { c["rope_theta"] = -5; }, {"'rope_theta'"}},
      {"HugeHeadDim", [](json& c) { c["head_dim"] = 1 << 30; }, {"'head_dim'", "too large"}},
      {"TieNotBool", [](json& c) { c["tie_word_embeddings"] = 1; }, {"'tie_word_embeddings'"}},
  };
  for (const char* field : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "max_position_embeddings"}) {
    const std::string name = field;
    cases.push_back(
        {"Missing_" + name, [name](json& c) { c.erase(name); }, {"'" + name + "'", "missing"}});
    cases.push_back(
        {"Null_" + name, [name](json& c) { c[name] = nullptr; }, {"'" + name + "'", "missing"}});
    cases.push_back(
        {"Zero_" + name, [name](json& c) { c[name] = 0; }, {"'" + name + "'", "positive"}});
    cases.push_back(
        {"Negative_" + name, [name](json& c) { c[name] = -16; }, {"'" + name + "'", "-16"}});
    cases.push_back(
        {"Fraction_" + name, [name](json& c) { c[name] = 16.5; }, {"'" + name + "'", "16.5"}});
    cases.push_back(
        {"String_" + name, [name](json& c) { c[name] = "16"; }, {"'" + name + "'", "\"16\""}});
    cases.push_back(
        {"Huge_" + name, [name](json& c) { c[name] = uint64_t{1} << 40; }, {"'" + name + "'"}});
  }
  cases.push_back({"Missing_num_key_value_heads",
                   [](json& c) { c.erase("num_key_value_heads"); },
                   {"'num_key_value_heads'", "missing"}});
  for (const char* field : {"num_key_value_heads", "head_dim"}) {
    const std::string name = field;
    cases.push_back(
        {"Zero_" + name, [name](json& c) { c[name] = 0; }, {"'" + name + "'", "positive"}});
    cases.push_back(
        {"Negative_" + name, [name](json& c) { c[name] = -2; }, {"'" + name + "'", "-2"}});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Config, ModelConfigRejects, ::testing::ValuesIn(rejections()),
                         [](const auto& info) { return info.param.label; });

TEST(ModelConfig, MalformedFilesNameTheFile) {
  TempDir dir;
  const std::string path = (dir / "config.json").string();
  EXPECT_ERROR(load_model_config(dir.path()), path, "cannot open");
  write_file(dir / "config.json", "{\"model_type\": \"qwen3\",");
  EXPECT_ERROR(load_model_config(dir.path()), path, "invalid JSON");
  write_file(dir / "config.json", "[1, 2]");
  EXPECT_ERROR(load_model_config(dir.path()), path, "JSON object");
  write_file(dir / "config.json", "");
  EXPECT_ERROR(load_model_config(dir.path()), path, "invalid JSON");
  // A repeated key would otherwise silently keep one of the two values.
  write_file(dir / "config.json", R"({"hidden_size": 16, "hidden_size": 32})");
  EXPECT_ERROR(load_model_config(dir.path()), path, "hidden_size", "twice");
}

}  // namespace
}  // namespace nanovllm
