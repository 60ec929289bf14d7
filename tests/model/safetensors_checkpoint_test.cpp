#include <gtest/gtest.h>

#include <cstring>

#include "model/safetensors.h"
#include "model_test_files.h"

namespace nanovllm {
namespace {

using nlohmann::json;
using testing::make_tensor;
using testing::TempDir;
using testing::write_file;
using testing::write_json;
using testing::write_safetensors;

testing::TensorData tensor(const std::string& name, float value = 1.0f) {
  return make_tensor(name, DType::kF32, {2}, {value, -value});
}

// Three shards as transformers writes them: a, b | c | d, e.
void write_three_shards(const TempDir& dir) {
  write_safetensors(dir / "model-00001-of-00003.safetensors", {tensor("a", 1), tensor("b", 2)});
  write_safetensors(dir / "model-00002-of-00003.safetensors", {tensor("c", 3)});
  write_safetensors(dir / "model-00003-of-00003.safetensors", {tensor("d", 4), tensor("e", 5)});
}

json three_shard_index() {
  return {{"metadata", {{"total_size", 40}}},
          {"weight_map",
           {{"a", "model-00001-of-00003.safetensors"},
            {"b", "model-00001-of-00003.safetensors"},
            {"c", "model-00002-of-00003.safetensors"},
            {"d", "model-00003-of-00003.safetensors"},
            {"e", "model-00003-of-00003.safetensors"}}}};
}

float first_value(const SafetensorsTensor& tensor) {
  float value;
  std::memcpy(&value, tensor.data, sizeof(value));
  return value;
}

TEST(SafetensorsCheckpoint, OpensSingleFile) {
  TempDir dir;
  write_safetensors(dir / "model.safetensors", {tensor("a", 1), tensor("b", 2)});
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir.path());
  EXPECT_EQ(checkpoint.source(), dir / "model.safetensors");
  EXPECT_EQ(checkpoint.files().size(), 1u);
  ASSERT_EQ(checkpoint.tensors().size(), 2u);
  EXPECT_EQ(first_value(*checkpoint.find("b")), 2.0f);
  EXPECT_EQ(checkpoint.find("c"), nullptr);
}

TEST(SafetensorsCheckpoint, OpensShardsOfTheIndex) {
  TempDir dir;
  write_three_shards(dir);
  write_json(dir / "model.safetensors.index.json", three_shard_index());
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir.path());
  EXPECT_EQ(checkpoint.source(), dir / "model.safetensors.index.json");
  EXPECT_EQ(checkpoint.files().size(), 3u);
  ASSERT_EQ(checkpoint.tensors().size(), 5u);
  const char* names[] = {"a", "b", "c", "d", "e"};
  for (int i = 0; i < 5; ++i) {
    const SafetensorsTensor& found = *checkpoint.find(names[i]);
    EXPECT_EQ(first_value(found), static_cast<float>(i + 1)) << names[i];
  }
  EXPECT_EQ(checkpoint.find("d")->file, dir / "model-00003-of-00003.safetensors");
}

// transformers looks for model.safetensors before the index; so do we.
TEST(SafetensorsCheckpoint, PrefersSingleFileOverIndex) {
  TempDir dir;
  write_safetensors(dir / "model.safetensors", {tensor("only", 9)});
  write_json(dir / "model.safetensors.index.json", three_shard_index());
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir.path());
  EXPECT_EQ(checkpoint.tensors().size(), 1u);
  EXPECT_NE(checkpoint.find("only"), nullptr);
}

TEST(SafetensorsCheckpoint, NoWeightsIsAnErrorNamingTheDirectory) {
  TempDir dir;
  EXPECT_ERROR(SafetensorsCheckpoint::open(dir.path()), dir.path().string(), "model.safetensors",
               "model.safetensors.index.json");
}

TEST(SafetensorsCheckpoint, BrokenShardIsAnErrorNamingTheShard) {
  TempDir dir;
  write_three_shards(dir);
  write_file(dir / "model-00002-of-00003.safetensors", "short");
  write_json(dir / "model.safetensors.index.json", three_shard_index());
  EXPECT_ERROR(SafetensorsCheckpoint::open(dir.path()),
               (dir / "model-00002-of-00003.safetensors").string(), "too short");
}

struct BadIndex {
  std::string label;
  std::function<void(const TempDir&, json&)> change;  // to the three-shard checkpoint
  std::vector<std::string> message_parts;
  bool write_raw = false;  // the change wrote the index itself
};
void PrintTo(const BadIndex& value, std::ostream* os) {
  *os << value.label;
}

class SafetensorsIndexRejects : public ::testing::TestWithParam<BadIndex> {};

TEST_P(SafetensorsIndexRejects, NamingIndexAndProblem) {
  TempDir dir;
  write_three_shards(dir);
  json index = three_shard_index();
  GetParam().change(dir, index);
  if (!GetParam().write_raw) write_json(dir / "model.safetensors.index.json", index);
  std::vector<std::string> parts = GetParam().message_parts;
  parts.push_back((dir / "model.safetensors.index.json").string());
  const std::string message =
      testing::error_message([&] { SafetensorsCheckpoint::open(dir.path()); });
  EXPECT_TRUE(testing::contains_all(message, parts)) << message;
}

INSTANTIATE_TEST_SUITE_P(
    Index, SafetensorsIndexRejects,
    ::testing::Values(
        BadIndex{"NotJson",
                 [](const TempDir& dir, json&) {
                   write_file(dir / "model.safetensors.index.json", "{\"weight_map\": {");
                 },
                 {"invalid JSON"},
                 true},
        BadIndex{"DuplicateEntry",
                 [](const TempDir& dir, json&) {
                   write_file(dir / "model.safetensors.index.json",
                              R"({"weight_map": {"a": "model-00001-of-00003.safetensors",)"
                              R"( "a": "model-00002-of-00003.safetensors"}})");
                 },
                 {"\"a\"", "twice"},
                 true},
        BadIndex{"NotObject",
                 [](const TempDir&, json& index) { index = json::array(); },
                 {"JSON object"}},
        BadIndex{"NoWeightMap",
                 [](const TempDir&, json& index) { index.erase("weight_map"); },
                 {"missing 'weight_map'"}},
        BadIndex{"WeightMapList",
                 [](const TempDir&, json& index) {
                   index["weight_map"] = {"a", "b"};
                 },
                 {"'weight_map' must map"}},
        BadIndex{"EmptyWeightMap",
                 [](const TempDir&, json& index) { index["weight_map"] = json::object(); },
                 {"no tensors"}},
        BadIndex{"ShardNotString",
                 [](const TempDir&, json& index) { index["weight_map"]["a"] = 1; },
                 {"'a'", "shard file"}},
        BadIndex{"ShardOutsideDirectory",
                 [](const TempDir&, json& index) {
                   index["weight_map"]["a"] = "../model-00001-of-00003.safetensors";
                 },
                 {"'a'", "shard file in this directory"}},
        BadIndex{"ShardAbsolute",
                 [](const TempDir& dir, json& index) {
                   index["weight_map"]["a"] = (dir / "model-00001-of-00003.safetensors").string();
                 },
                 {"'a'", "shard file in this directory"}},
        BadIndex{"MissingShard",
                 [](const TempDir& dir, json&) {
                   std::filesystem::remove(dir / "model-00002-of-00003.safetensors");
                 },
                 {"shard 'model-00002-of-00003.safetensors'", "does not exist"}},
        BadIndex{"TensorNotInItsShard",
                 [](const TempDir&, json& index) {
                   index["weight_map"]["z"] = "model-00002-of-00003.safetensors";
                 },
                 {"'z'", "model-00002-of-00003.safetensors", "does not contain it"}},
        BadIndex{"TensorNotListed",
                 [](const TempDir&, json& index) { index["weight_map"].erase("d"); },
                 {"'d'", "model-00003-of-00003.safetensors", "does not list"}},
        BadIndex{"TensorMappedElsewhere",
                 [](const TempDir&, json& index) {
                   index["weight_map"]["c"] = "model-00003-of-00003.safetensors";
                 },
                 {"'c'", "model-00003-of-00003.safetensors", "does not contain it"}},
        BadIndex{"TensorInTwoShards",
                 [](const TempDir& dir, json&) {
                   write_safetensors(dir / "model-00002-of-00003.safetensors",
                                     {tensor("c", 3), tensor("a", 1)});
                 },
                 {"'a'", "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                  "two shards"}}),
    [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace nanovllm
