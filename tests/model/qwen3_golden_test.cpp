// The CPU model against fp32 goldens from Hugging Face transformers
// (tests/data/models/*/golden.json, made by tools/make_model_fixtures.py).
// Tolerance: |logit - golden| <= 2e-5 + 1e-5 * |golden|; greedy tokens must be equal except at a
// step whose golden top-1/top-2 margin is below 1e-4 (then either of the two is accepted and
// the continuation stops being compared, since it legitimately diverges).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/decoder/decoder_model.h"
#include "model/decoder/decoder_weights.h"
#include "model/model_config.h"

namespace nanovllm {
namespace {

constexpr float kAbsTolerance = 2e-5f;
constexpr float kRelTolerance = 1e-5f;
constexpr float kTieMargin = 1e-4f;

std::string model_dir(const std::string& name) {
  return std::string(NANOVLLM_TEST_DATA_DIR) + "/models/" + name;
}

nlohmann::json load_golden(const std::string& name) {
  std::ifstream file(model_dir(name) + "/golden.json");
  return nlohmann::json::parse(file);
}

// A single sequence in a paged KV cache whose blocks are laid out in reverse order, so a
// forward that ignores the block table cannot pass.
class SingleSequenceRunner {
 public:
  SingleSequenceRunner(DecoderModel& model, int block_size, int max_tokens)
      : model_(model), block_size_(block_size) {
    const ModelConfig& config = model.config();
    const int num_blocks = (max_tokens + block_size - 1) / block_size;
    for (int b = 0; b < num_blocks; ++b) block_table_.push_back(num_blocks - 1 - b);
    for (int layer = 0; layer < config.num_hidden_layers; ++layer) {
      for (int part = 0; part < 2; ++part) {
        cache_storage_.emplace_back(
            DType::kF32, std::initializer_list<int64_t>{
                             num_blocks, block_size, config.num_key_value_heads, config.head_dim});
      }
      kv_cache_.push_back({cache_storage_[2 * layer].tensor, cache_storage_[2 * layer + 1].tensor});
    }
  }

  // Runs `tokens` as the next chunk of the sequence; returns fp32 logits [rows, vocab] for every
  // chunk position when all_positions, else for the last one.
  std::vector<float> run(const std::vector<int>& tokens, bool all_positions) {
    const int count = static_cast<int>(tokens.size());
    std::vector<int> ids = tokens, positions, slots, last_rows;
    for (int i = 0; i < count; ++i) {
      const int position = length_ + i;
      positions.push_back(position);
      slots.push_back(block_table_[position / block_size_] * block_size_ + position % block_size_);
      if (all_positions || i == count - 1) last_rows.push_back(i);
    }
    length_ += count;
    std::vector<int> cu_seqlens = {0, count};
    std::vector<int> context_lens = {length_};
    std::vector<int> table = block_table_;

    ForwardBatch batch;
    const int64_t rows = static_cast<int64_t>(last_rows.size());
    const int64_t table_width = static_cast<int64_t>(table.size());
    batch.input_ids = Tensor(ids.data(), DType::kI32, {count});
    batch.positions = Tensor(positions.data(), DType::kI32, {count});
    batch.last_token_indices = Tensor(last_rows.data(), DType::kI32, {rows});
    batch.attention.num_seqs = 1;
    batch.attention.max_seqlen_q = count;
    batch.attention.max_seqlen_k = length_;
    batch.attention.cu_seqlens_q = Tensor(cu_seqlens.data(), DType::kI32, {2});
    batch.attention.context_lens = Tensor(context_lens.data(), DType::kI32, {1});
    batch.attention.block_tables = Tensor(table.data(), DType::kI32, {1, table_width});
    batch.attention.slot_mapping = Tensor(slots.data(), DType::kI32, {count});

    const Tensor logits = model_.forward(batch, kv_cache_);
    EXPECT_EQ(logits.size(0), rows);
    return std::vector<float>(logits.data_as<float>(), logits.data_as<float>() + logits.numel());
  }

 private:
  DecoderModel& model_;
  int block_size_;
  int length_ = 0;
  std::vector<int> block_table_;
  std::vector<OwnedTensor> cache_storage_;
  std::vector<LayerKVCache> kv_cache_;
};

int argmax(const float* logits, int vocab) {
  return static_cast<int>(std::max_element(logits, logits + vocab) - logits);
}

// Checks our logits row against the golden top-k (ids and values) of the same position.
void expect_topk_close(const float* logits, const nlohmann::json& golden,
                       const std::string& where) {
  const auto& ids = golden["ids"];
  const auto& values = golden["logits"];
  for (size_t k = 0; k < ids.size(); ++k) {
    const float expected = values[k].get<float>();
    const float actual = logits[ids[k].get<int>()];
    ASSERT_LE(std::fabs(actual - expected), kAbsTolerance + kRelTolerance * std::fabs(expected))
        << where << " top-" << k << " id " << ids[k];
  }
}

struct GoldenCase {
  std::string model;
  int block_size;
  int prefill_chunk;  // 0 = whole prompt in one step
};

class Qwen3Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Qwen3Golden, PromptLogitsAndGreedyDecodeMatchTransformers) {
  const GoldenCase& param = GetParam();
  const nlohmann::json golden = load_golden(param.model);
  const ModelConfig config = load_model_config(model_dir(param.model));
  auto backend = make_cpu_backend();
  DecoderModel model(
      config,
      load_decoder_weights(model_dir(param.model), config, *backend, LoadFormat::kSafetensors),
      *backend);
  const int vocab = config.vocab_size;

  for (const auto& prompt_case : golden["prompts"]) {
    const std::vector<int> prompt = prompt_case["token_ids"].get<std::vector<int>>();
    const int steps = static_cast<int>(prompt_case["greedy_steps"].size());
    const std::string where = param.model + " prompt of " + std::to_string(prompt.size());
    SingleSequenceRunner runner(model, param.block_size, static_cast<int>(prompt.size()) + steps);

    // Prefill, whole or in chunks, with logits at every prompt position.
    std::vector<float> prompt_logits;
    const size_t chunk = param.prefill_chunk > 0 ? param.prefill_chunk : prompt.size();
    for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
      const size_t end = std::min(prompt.size(), begin + chunk);
      const std::vector<float> part =
          runner.run(std::vector<int>(prompt.begin() + begin, prompt.begin() + end), true);
      prompt_logits.insert(prompt_logits.end(), part.begin(), part.end());
    }
    for (const auto& position_case : prompt_case["prompt_topk"]) {
      const int position = position_case["position"];
      expect_topk_close(&prompt_logits[static_cast<size_t>(position) * vocab], position_case,
                        where + " position " + std::to_string(position));
    }

    // Greedy decode one token at a time through the decode path.
    const std::vector<int> expected_tokens = prompt_case["greedy_token_ids"];
    const float* logits = &prompt_logits[(prompt.size() - 1) * vocab];
    std::vector<float> step_logits;
    for (int step = 0; step < steps; ++step) {
      const auto& step_case = prompt_case["greedy_steps"][step];
      const std::string at = where + " step " + std::to_string(step);
      expect_topk_close(logits, step_case, at);
      const int token = argmax(logits, vocab);
      if (step_case["margin"].get<float>() < kTieMargin) {
        const int second = step_case["ids"][1];
        EXPECT_TRUE(token == expected_tokens[step] || token == second) << at;
        break;  // a near-tie: the continuation may legitimately differ from here
      }
      ASSERT_EQ(token, expected_tokens[step]) << at;
      step_logits = runner.run({token}, false);
      logits = step_logits.data();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, Qwen3Golden,
    ::testing::Values(GoldenCase{"qwen3-tiny-tied", 16, 0}, GoldenCase{"qwen3-tiny-tied", 256, 0},
                      GoldenCase{"qwen3-tiny-untied", 16, 0},
                      GoldenCase{"qwen3-tiny-untied", 256, 0},
                      GoldenCase{"qwen3-tiny-untied", 64, 37}, GoldenCase{"qwen2-tiny", 16, 0},
                      GoldenCase{"qwen2-tiny", 64, 37}, GoldenCase{"llama-tiny", 16, 0},
                      GoldenCase{"llama-tiny", 256, 37}, GoldenCase{"qwen3-moe-tiny", 16, 0},
                      GoldenCase{"qwen3-moe-tiny", 128, 37}),
    [](const ::testing::TestParamInfo<GoldenCase>& info) {
      std::string name =
          info.param.model + "_block" + std::to_string(info.param.block_size) +
          (info.param.prefill_chunk ? "_chunk" + std::to_string(info.param.prefill_chunk) : "");
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

}  // namespace
}  // namespace nanovllm
