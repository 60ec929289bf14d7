#include "model/decoder/decoder_weights.h"

#include <gtest/gtest.h>

#include "model/model_config.h"
#include "weight_test_support.h"

namespace nanovllm {
namespace {

using nlohmann::json;
using testing::FakeBackend;
using testing::qwen3_reference_tensors;
using testing::ReferenceTensor;
using testing::round_to;
using testing::TempDir;
using testing::tiny_config_json;
using testing::write_checkpoint;

// Checkpoint name -> values after storing as the file dtype and loading in `compute`.
std::map<std::string, std::vector<float>> expected_values(
    const std::vector<ReferenceTensor>& tensors, const std::vector<DType>& file_dtypes,
    DType compute) {
  std::map<std::string, std::vector<float>> expected;
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<float> values = tensors[i].values;
    for (float& value : values) {
      value = round_to(compute, round_to(file_dtypes[i % file_dtypes.size()], value));
    }
    expected[tensors[i].name] = std::move(values);
  }
  return expected;
}

struct LoadCase {
  std::string label;
  std::vector<DType> file_dtypes;
  DType compute;
  int shards;
};
void PrintTo(const LoadCase& value, std::ostream* os) {
  *os << value.label;
}

class DecoderWeightsLoads : public ::testing::TestWithParam<LoadCase> {};

TEST_P(DecoderWeightsLoads, EveryValueAfterDtypeConversion) {
  const LoadCase& c = GetParam();
  TempDir dir;
  const json config_json = tiny_config_json();
  const std::vector<ReferenceTensor> tensors = qwen3_reference_tensors(config_json, 1);
  write_checkpoint(dir.path(), config_json, tensors, c.file_dtypes, c.shards);

  const ModelConfig config = load_model_config(dir.path());
  FakeBackend backend(c.compute);
  const DecoderWeights weights =
      load_decoder_weights(dir.path(), config, backend, LoadFormat::kSafetensors);
  for (const Buffer& buffer : weights.storage) EXPECT_EQ(buffer.device(), Device::kCPU);
  EXPECT_EQ(weights.layers[0].qkv_proj.dtype(), c.compute);
  testing::expect_weights_match(backend, weights,
                                expected_values(tensors, c.file_dtypes, c.compute),
                                config.num_hidden_layers, false);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, DecoderWeightsLoads,
    ::testing::Values(LoadCase{"F32FileF32Compute", {DType::kF32}, DType::kF32, 1},
                      LoadCase{"BF16FileF32Compute", {DType::kBF16}, DType::kF32, 1},
                      LoadCase{"F16FileF32Compute", {DType::kF16}, DType::kF32, 2},
                      LoadCase{"BF16FileBF16Compute", {DType::kBF16}, DType::kBF16, 3},
                      LoadCase{"F32FileBF16Compute", {DType::kF32}, DType::kBF16, 2},
                      LoadCase{"F16FileBF16Compute", {DType::kF16}, DType::kBF16, 1},
                      LoadCase{"MixedFileF32Compute3Shards",
                               {DType::kBF16, DType::kF16, DType::kF32},
                               DType::kF32,
                               3},
                      LoadCase{"MixedFileBF16Compute2Shards",
                               {DType::kF32, DType::kBF16, DType::kF16},
                               DType::kBF16,
                               2},
                      LoadCase{"BF16FileF16Compute", {DType::kBF16}, DType::kF16, 2},
                      LoadCase{"F32FileF16Compute", {DType::kF32}, DType::kF16, 1}),
    [](const auto& info) { return info.param.label; });

// Constant rows make the merge order visible: q rows 1, k rows 2, v rows 3, gate 4, up 5.
TEST(DecoderWeights, MergesQkvAndGateUpRowsInOrder) {
  TempDir dir;
  const json config_json = tiny_config_json();
  std::vector<ReferenceTensor> tensors = qwen3_reference_tensors(config_json, 2);
  const std::map<std::string, float> marks = {
      {"q_proj", 1}, {"k_proj", 2}, {"v_proj", 3}, {"gate_proj", 4}, {"up_proj", 5}};
  for (ReferenceTensor& tensor : tensors) {
    for (const auto& [part, mark] : marks) {
      if (tensor.name.find(part) != std::string::npos) {
        std::fill(tensor.values.begin(), tensor.values.end(), mark);
      }
    }
  }
  write_checkpoint(dir.path(), config_json, tensors, {DType::kBF16}, 1);
  const ModelConfig config = load_model_config(dir.path());
  FakeBackend backend(DType::kF32);
  const DecoderWeights weights =
      load_decoder_weights(dir.path(), config, backend, LoadFormat::kSafetensors);

  // 4 heads and 2 kv heads of 8 dims over hidden 16; intermediate 24.
  const DecoderLayerWeights& layer = weights.layers[1];
  EXPECT_EQ(testing::shape_of(layer.qkv_proj), (std::vector<int64_t>{64, 16}));
  const std::vector<float> qkv = testing::read_floats(backend, layer.qkv_proj);
  for (int row = 0; row < 64; ++row) {
    const float mark = row < 32 ? 1 : row < 48 ? 2 : 3;
    for (int col = 0; col < 16; ++col) ASSERT_EQ(qkv[row * 16 + col], mark) << row;
  }
  EXPECT_EQ(testing::shape_of(layer.gate_up_proj), (std::vector<int64_t>{48, 16}));
  const std::vector<float> gate_up = testing::read_floats(backend, layer.gate_up_proj);
  for (int row = 0; row < 48; ++row) {
    for (int col = 0; col < 16; ++col) ASSERT_EQ(gate_up[row * 16 + col], row < 24 ? 4 : 5);
  }
  EXPECT_EQ(testing::shape_of(layer.o_proj), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(testing::shape_of(layer.down_proj), (std::vector<int64_t>{16, 24}));
  EXPECT_EQ(testing::shape_of(layer.q_norm), (std::vector<int64_t>{8}));
  EXPECT_EQ(testing::shape_of(weights.embed_tokens), (std::vector<int64_t>{40, 16}));
}

TEST(DecoderWeights, TiedHeadViewsTheEmbedding) {
  TempDir dir;
  json config_json = tiny_config_json();
  config_json["tie_word_embeddings"] = true;
  const std::vector<ReferenceTensor> tensors = qwen3_reference_tensors(config_json, 3);
  write_checkpoint(dir.path(), config_json, tensors, {DType::kF32}, 2);
  const ModelConfig config = load_model_config(dir.path());
  FakeBackend backend(DType::kF32);
  const DecoderWeights weights =
      load_decoder_weights(dir.path(), config, backend, LoadFormat::kSafetensors);
  testing::expect_weights_match(backend, weights,
                                expected_values(tensors, {DType::kF32}, DType::kF32), 2, true);
  EXPECT_EQ(testing::shape_of(weights.lm_head), (std::vector<int64_t>{40, 16}));
}

// Some tied checkpoints ship lm_head.weight anyway; the embedding is what a tied model uses.
TEST(DecoderWeights, TiedCheckpointWithHeadIgnoresIt) {
  TempDir dir;
  json config_json = tiny_config_json();
  std::vector<ReferenceTensor> tensors = qwen3_reference_tensors(config_json, 4);  // with head
  config_json["tie_word_embeddings"] = true;
  write_checkpoint(dir.path(), config_json, tensors, {DType::kF32}, 1);
  const ModelConfig config = load_model_config(dir.path());
  FakeBackend backend(DType::kF32);
  const DecoderWeights weights =
      load_decoder_weights(dir.path(), config, backend, LoadFormat::kSafetensors);
  EXPECT_EQ(weights.lm_head.data(), weights.embed_tokens.data());
  EXPECT_EQ(testing::read_floats(backend, weights.lm_head), tensors.front().values);
}

class DecoderWeightsErrors : public ::testing::Test {
 protected:
  // Writes the tiny checkpoint after `change` edits its tensor list, then loads it.
  std::string load_error(const std::function<void(std::vector<ReferenceTensor>&)>& change,
                         int shards = 1, json config_json = tiny_config_json()) {
    std::vector<ReferenceTensor> tensors = qwen3_reference_tensors(config_json, 5);
    change(tensors);
    write_checkpoint(dir_.path(), config_json, tensors, {DType::kBF16}, shards);
    const ModelConfig config = load_model_config(dir_.path());
    FakeBackend backend(DType::kF32);
    return testing::error_message(
        [&] { load_decoder_weights(dir_.path(), config, backend, LoadFormat::kSafetensors); });
  }

  static void erase(std::vector<ReferenceTensor>& tensors, const std::string& name) {
    std::erase_if(tensors, [&](const ReferenceTensor& t) { return t.name == name; });
  }
  static ReferenceTensor& find(std::vector<ReferenceTensor>& tensors, const std::string& name) {
    for (ReferenceTensor& tensor : tensors) {
      if (tensor.name == name) return tensor;
    }
    throw std::runtime_error("no tensor " + name);
  }

  TempDir dir_;
};

TEST_F(DecoderWeightsErrors, MissingTensorsAreListed) {
  const std::string message = load_error([](auto& tensors) {
    erase(tensors, "model.layers.1.self_attn.k_norm.weight");
    erase(tensors, "model.norm.weight");
  });
  EXPECT_TRUE(testing::contains_all(
      message, {(dir_ / "model.safetensors").string(), "missing 2 tensor(s)",
                "model.layers.1.self_attn.k_norm.weight", "model.norm.weight"}))
      << message;
}

TEST_F(DecoderWeightsErrors, UntiedWithoutHeadIsMissingIt) {
  const std::string message = load_error([](auto& tensors) { erase(tensors, "lm_head.weight"); });
  EXPECT_TRUE(testing::contains_all(
      message, {"missing 1 tensor(s): lm_head.weight", "tie_word_embeddings=false"}))
      << message;
}

TEST_F(DecoderWeightsErrors, ManyMissingTensorsListTheFirstFew) {
  const std::string message = load_error([](auto& tensors) { tensors.resize(1); });
  EXPECT_TRUE(testing::contains_all(message, {"missing 24 tensor(s)", "(19 more)"})) << message;
}

// A checkpoint with more layers than config.json says: the extra layer's tensors are unexpected.
TEST_F(DecoderWeightsErrors, LayerBeyondConfigIsUnexpected) {
  json bigger = tiny_config_json();
  bigger["num_hidden_layers"] = 3;
  const std::vector<ReferenceTensor> extra = qwen3_reference_tensors(bigger, 5);
  const std::string message = load_error(
      [&](auto& tensors) {
        for (const ReferenceTensor& tensor : extra) {
          if (tensor.name.rfind("model.layers.2.", 0) == 0) tensors.push_back(tensor);
        }
      },
      2);
  EXPECT_TRUE(testing::contains_all(
      message,
      {(dir_ / "model.safetensors.index.json").string(), "2 layers", "unexpected 11 tensor(s)",
       "model.layers.2.", "(in model-00002-of-00002.safetensors)"}))
      << message;
  EXPECT_EQ(message.find("missing"), std::string::npos) << message;
}

TEST_F(DecoderWeightsErrors, MissingAndUnexpectedTogether) {
  const std::string message = load_error([](auto& tensors) {
    find(tensors, "model.layers.0.mlp.up_proj.weight").name = "model.layers.0.mlp.upproj.weight";
  });
  EXPECT_TRUE(
      testing::contains_all(message, {"missing 1 tensor(s): model.layers.0.mlp.up_proj.weight",
                                      "unexpected 1 tensor(s): model.layers.0.mlp.upproj.weight"}))
      << message;
}

TEST_F(DecoderWeightsErrors, MisShapedTensorNamesFileAndBothShapes) {
  const std::string message = load_error(
      [](auto& tensors) {
        ReferenceTensor& k = find(tensors, "model.layers.1.self_attn.k_proj.weight");
        k.shape = {8, 16};  // one kv head instead of two
        k.values.resize(8 * 16);
      },
      3);
  EXPECT_TRUE(testing::contains_all(
      message, {"model-0000", "-of-00003.safetensors", "'model.layers.1.self_attn.k_proj.weight'",
                "shape [8, 16]", "implies [16, 16]"}))
      << message;
}

TEST_F(DecoderWeightsErrors, TransposedTensorIsMisShaped) {
  const std::string message = load_error([](auto& tensors) {
    find(tensors, "model.layers.0.mlp.down_proj.weight").shape = {24, 16};
  });
  EXPECT_TRUE(testing::contains_all(
      message, {"'model.layers.0.mlp.down_proj.weight'", "shape [24, 16]", "implies [16, 24]"}))
      << message;
}

TEST_F(DecoderWeightsErrors, HeadDimFromConfigMustMatch) {
  json config_json = tiny_config_json();
  std::vector<ReferenceTensor> tensors = qwen3_reference_tensors(config_json, 5);
  config_json["head_dim"] = 4;  // hidden / heads, as a guess would have it
  testing::write_checkpoint(dir_.path(), config_json, tensors, {DType::kBF16}, 1);
  FakeBackend backend(DType::kF32);
  EXPECT_ERROR(load_decoder_weights(dir_.path(), load_model_config(dir_.path()), backend,
                                    LoadFormat::kSafetensors),
               "'model.layers.0.self_attn.q_proj.weight'", "shape [32, 16]", "implies [16, 16]");
}

TEST(DecoderWeights, IntegerWeightIsAnError) {
  TempDir dir;
  const json config_json = tiny_config_json();
  std::vector<ReferenceTensor> tensors = qwen3_reference_tensors(config_json, 6);
  write_checkpoint(dir.path(), config_json, tensors, {DType::kF32}, 1);
  // Rewrite the file with the final norm stored as I32.
  std::vector<testing::TensorData> data;
  for (const ReferenceTensor& tensor : tensors) {
    data.push_back(testing::make_tensor(tensor.name, DType::kF32, tensor.shape, tensor.values));
  }
  for (testing::TensorData& tensor : data) {
    if (tensor.name == "model.norm.weight") tensor.dtype = "I32";
  }
  testing::write_safetensors(dir / "model.safetensors", data);
  FakeBackend backend(DType::kF32);
  EXPECT_ERROR(load_decoder_weights(dir.path(), load_model_config(dir.path()), backend,
                                    LoadFormat::kSafetensors),
               (dir / "model.safetensors").string(), "'model.norm.weight'", "int32",
               "BF16, F16 or F32");
}

TEST(DecoderWeights, ValuesBeyondFloat16RangeAreAnError) {
  TempDir dir;
  const json config_json = tiny_config_json();
  std::vector<ReferenceTensor> tensors = qwen3_reference_tensors(config_json, 7);
  tensors[5].values[3] = 1e6f;
  write_checkpoint(dir.path(), config_json, tensors, {DType::kF32}, 1);
  FakeBackend backend(DType::kF16);
  EXPECT_ERROR(load_decoder_weights(dir.path(), load_model_config(dir.path()), backend,
                                    LoadFormat::kSafetensors),
               (dir / "model.safetensors").string(), tensors[5].name, "1 value(s)",
               "float16 range");
}

TEST(DecoderWeights, NoCheckpointIsAnError) {
  TempDir dir;
  testing::write_json(dir / "config.json", tiny_config_json());
  FakeBackend backend(DType::kF32);
  EXPECT_ERROR(load_decoder_weights(dir.path(), load_model_config(dir.path()), backend,
                                    LoadFormat::kSafetensors),
               dir.path().string(), "no model.safetensors");
}

// Rows [first, first + count) of a row-major matrix of `columns` columns.
std::vector<float> rows_of(const std::vector<float>& matrix, int64_t columns, int64_t first,
                           int64_t count) {
  return {matrix.begin() + first * columns, matrix.begin() + (first + count) * columns};
}

// Columns [first, first + count) of a row-major matrix of `columns` columns.
std::vector<float> columns_of(const std::vector<float>& matrix, int64_t columns, int64_t first,
                              int64_t count) {
  std::vector<float> part;
  for (size_t row = 0; row * columns < matrix.size(); ++row) {
    const auto start = matrix.begin() + static_cast<int64_t>(row) * columns + first;
    part.insert(part.end(), start, start + count);
  }
  return part;
}

// Each rank's shard holds exactly its rows (q/k/v by heads, gate/up, the vocabulary) and
// columns (o_proj, down_proj) of the whole tensors; the KV heads are replicated over 4 ranks.
// Straight from an F32 file, and converted from BF16.
TEST(DecoderWeights, ShardsAreTheRowsAndColumnsOfTheWholeTensors) {
  for (DType file_dtype : {DType::kF32, DType::kBF16}) {
    TempDir dir;
    const json config_json = tiny_config_json();  // 4 heads, 2 KV heads of 8, hidden 16
    write_checkpoint(dir.path(), config_json, qwen3_reference_tensors(config_json, 3), {file_dtype},
                     2);
    const ModelConfig config = load_model_config(dir.path());
    FakeBackend backend(DType::kF32);
    const DecoderWeights whole =
        load_decoder_weights(dir.path(), config, backend, LoadFormat::kSafetensors);
    const auto read = [&](const Tensor& t) { return testing::read_floats(backend, t); };
    const DecoderLayerWeights& all = whole.layers[1];
    const int64_t hidden = 16, d = 8, heads = 4, kv = 2, inter = 24, vocab = 40;
    for (int ranks : {2, 4}) {
      for (int rank = 0; rank < ranks; ++rank) {
        const std::string where =
            fmt::format("{} file, rank {} of {}", dtype_name(file_dtype), rank, ranks);
        const DecoderWeights shard = load_decoder_weights(dir.path(), config, backend,
                                                          LoadFormat::kSafetensors, {rank, ranks});
        const DecoderLayerWeights& mine = shard.layers[1];
        const int64_t q_rows = heads / ranks * d;
        const int64_t kv_head = kv >= ranks ? rank * (kv / ranks) : rank / (ranks / kv);
        const int64_t kv_rows = (kv >= ranks ? kv / ranks : 1) * d;
        const int64_t cols = inter / ranks;
        const std::vector<float> qkv = read(all.qkv_proj);
        const std::vector<float> q = rows_of(qkv, hidden, rank * q_rows, q_rows);
        const std::vector<float> k = rows_of(qkv, hidden, heads * d + kv_head * d, kv_rows);
        const std::vector<float> v = rows_of(qkv, hidden, (heads + kv) * d + kv_head * d, kv_rows);
        EXPECT_EQ(read(mine.qkv_proj), testing::concat({&q, &k, &v})) << where;
        EXPECT_EQ(read(mine.o_proj), columns_of(read(all.o_proj), heads * d, rank * q_rows, q_rows))
            << where;
        const std::vector<float> gate_up = read(all.gate_up_proj);
        const std::vector<float> gate = rows_of(gate_up, hidden, rank * cols, cols);
        const std::vector<float> up = rows_of(gate_up, hidden, inter + rank * cols, cols);
        EXPECT_EQ(read(mine.gate_up_proj), testing::concat({&gate, &up})) << where;
        EXPECT_EQ(read(mine.down_proj), columns_of(read(all.down_proj), inter, rank * cols, cols))
            << where;
        EXPECT_EQ(read(mine.input_layernorm), read(all.input_layernorm)) << where;
        EXPECT_EQ(read(mine.k_norm), read(all.k_norm)) << where;
        const int64_t rows = vocab / ranks;
        EXPECT_EQ(read(shard.embed_tokens),
                  rows_of(read(whole.embed_tokens), hidden, rank * rows, rows))
            << where;
        EXPECT_EQ(read(shard.lm_head), rows_of(read(whole.lm_head), hidden, rank * rows, rows))
            << where;
      }
    }
  }
}

}  // namespace
}  // namespace nanovllm
