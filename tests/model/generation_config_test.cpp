#include <gtest/gtest.h>

#include "model/model_config.h"
#include "model_test_files.h"

namespace nanovllm {
namespace {

using testing::TempDir;
using testing::write_file;
using testing::write_json;

ModelConfig config_with_eos(std::vector<int> ids) {
  ModelConfig config;
  config.eos_token_ids = std::move(ids);
  return config;
}

// generation_config.json of Qwen/Qwen3-0.6B as released.
const char* kQwen3_0_6B = R"({
  "bos_token_id": 151643,
  "do_sample": true,
  "eos_token_id": [151645, 151643],
  "pad_token_id": 151643,
  "temperature": 0.6,
  "top_k": 20,
  "top_p": 0.95,
  "transformers_version": "4.51.0"
})";

TEST(GenerationConfig, EveryListedEosStops) {
  TempDir dir;
  write_file(dir / "generation_config.json", kQwen3_0_6B);
  const GenerationConfig generation = load_generation_config(dir.path(), config_with_eos({151645}));
  EXPECT_EQ(generation.eos_token_ids, (std::vector<int>{151645, 151643}));
}

TEST(GenerationConfig, SingleIntEos) {
  TempDir dir;
  write_json(dir / "generation_config.json", {{"eos_token_id", 5}});
  EXPECT_EQ(load_generation_config(dir.path(), config_with_eos({1})).eos_token_ids,
            std::vector<int>{5});
}

TEST(GenerationConfig, FallsBackToConfigWithoutFile) {
  TempDir dir;
  EXPECT_EQ(load_generation_config(dir.path(), config_with_eos({3, 4})).eos_token_ids,
            (std::vector<int>{3, 4}));
}

TEST(GenerationConfig, FallsBackToConfigWithoutField) {
  TempDir dir;
  write_json(dir / "generation_config.json", {{"temperature", 0.7}});
  EXPECT_EQ(load_generation_config(dir.path(), config_with_eos({3})).eos_token_ids,
            std::vector<int>{3});
  write_json(dir / "generation_config.json", {{"eos_token_id", nullptr}});
  EXPECT_EQ(load_generation_config(dir.path(), config_with_eos({3})).eos_token_ids,
            std::vector<int>{3});
}

TEST(GenerationConfig, MalformedFileIsAnErrorNamingIt) {
  TempDir dir;
  const std::string path = (dir / "generation_config.json").string();
  write_file(dir / "generation_config.json", "{\"eos_token_id\": [1, 2");
  EXPECT_ERROR(load_generation_config(dir.path(), config_with_eos({1})), path, "invalid JSON");
  write_file(dir / "generation_config.json", "\"text\"");
  EXPECT_ERROR(load_generation_config(dir.path(), config_with_eos({1})), path, "JSON object");
  write_json(dir / "generation_config.json", {{"eos_token_id", {1, "2"}}});
  EXPECT_ERROR(load_generation_config(dir.path(), config_with_eos({1})), path, "'eos_token_id'");
}

}  // namespace
}  // namespace nanovllm
