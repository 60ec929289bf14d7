// LLMEngine over the fake executor, random workloads, and output comparisons.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/llm_engine.h"
#include "fake_executor.h"

namespace nanovllm::testing {

inline const std::vector<int> kEosTokenIds = {0};

// Token t decodes to one letter; the prompt is ignored.
inline std::string letter_of(int token_id) {
  return std::string(1, static_cast<char>('a' + token_id % 26));
}

class LetterDecoder final : public TokenTextDecoder {
 public:
  std::string push(int token_id) override { return letter_of(token_id); }
};

inline TokenTextDecoderFactory letter_decoders() {
  return [](std::span<const int>) { return std::make_unique<LetterDecoder>(); };
}

struct EngineSetup {
  int num_blocks = 1024;  // 4096 tokens: max_model_len fits
  int block_size = 4;
  int max_num_batched_tokens = 1024;
  int max_num_seqs = 64;
  bool prefix_caching = true;
  int vocab_size = 64;
  int max_model_len = 4096;
  uint64_t seed = 0;
  bool async_scheduling = true;  // decode steps planned ahead of their samples
};

// Random limits over a small pool: block sizes 1 to 8 and often fewer blocks than the longest
// sequence needs, so that some prompts are rejected, some sequences stop at the cache's capacity
// and preemption is frequent; small step budgets and batches, prefix caching mostly on.
inline EngineSetup random_small_setup(std::mt19937_64& gen) {
  const auto uniform = [&gen](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(gen);
  };
  EngineSetup setup;
  setup.block_size = std::vector<int>{1, 2, 4, 8}[uniform(0, 3)];
  setup.num_blocks = uniform(40, 120) / setup.block_size + 2;
  setup.max_num_batched_tokens = uniform(4, 64);
  setup.max_num_seqs = uniform(1, 24);
  setup.prefix_caching = uniform(0, 4) != 0;
  setup.async_scheduling = uniform(0, 1) != 0;
  return setup;
}

struct FakeEngine {
  std::unique_ptr<LLMEngine> engine;
  FakeExecutor* executor = nullptr;  // owned by the engine
};

inline FakeEngine make_fake_engine(const EngineSetup& setup,
                                   TokenTextDecoderFactory decoder_factory = nullptr) {
  EngineConfig config;
  config.num_kvcache_blocks = setup.num_blocks;
  config.kvcache_block_size = setup.block_size;
  config.max_num_batched_tokens = setup.max_num_batched_tokens;
  config.max_num_seqs = setup.max_num_seqs;
  config.enable_prefix_caching = setup.prefix_caching;
  config.max_model_len = setup.max_model_len;
  config.seed = setup.seed;
  config.async_scheduling = setup.async_scheduling;
  auto executor = std::make_unique<FakeExecutor>(setup.num_blocks, setup.block_size,
                                                 setup.vocab_size, setup.max_model_len);
  FakeEngine fake;
  fake.executor = executor.get();
  fake.engine = std::make_unique<LLMEngine>(config, std::move(executor), kEosTokenIds,
                                            std::move(decoder_factory));
  return fake;
}

struct Workload {
  std::vector<std::vector<int>> prompts;
  std::vector<SamplingParams> params;
};

// Prompts made of a few shared prefixes plus random tails (so prefix caching has work), with
// a mix of greedy and seeded random sampling. Tokens are in [1, vocab): 0 is EOS.
inline Workload make_workload(uint64_t seed, int count, int vocab_size, int max_prefix = 20,
                              int max_tail = 20, int max_tokens = 24) {
  std::mt19937_64 gen(seed);
  const auto uniform = [&gen](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(gen);
  };
  std::vector<std::vector<int>> prefixes;
  for (int i = 0; i < 4; ++i) {
    std::vector<int> prefix(uniform(0, max_prefix));
    for (int& token : prefix) token = uniform(1, vocab_size - 1);
    prefixes.push_back(prefix);
  }
  Workload workload;
  for (int i = 0; i < count; ++i) {
    std::vector<int> prompt = prefixes[uniform(0, 3)];
    const int tail = uniform(prompt.empty() ? 1 : 0, max_tail);
    for (int t = 0; t < tail; ++t) prompt.push_back(uniform(1, vocab_size - 1));
    SamplingParams params;
    params.max_tokens = uniform(1, max_tokens);
    params.ignore_eos = uniform(0, 3) == 0;
    switch (uniform(0, 3)) {
      case 0:
        params.temperature = 0.0f;
        break;
      case 1:
        params.temperature = 0.8f;
        break;
      case 2:
        params.temperature = 1.0f;
        params.top_k = uniform(1, 10);
        break;
      default:
        params.temperature = 0.7f;
        params.top_p = 0.9f;
        break;
    }
    if (!params.is_greedy()) params.seed = gen();
    if (uniform(0, 4) == 0) params.logprobs = uniform(0, 3);
    workload.prompts.push_back(std::move(prompt));
    workload.params.push_back(params);
  }
  return workload;
}

inline void expect_same_output(const RequestOutput& actual, const RequestOutput& expected,
                               size_t index) {
  SCOPED_TRACE(::testing::Message() << "request " << index);
  EXPECT_EQ(actual.error, expected.error);
  EXPECT_EQ(actual.prompt_token_ids, expected.prompt_token_ids);
  EXPECT_EQ(actual.token_ids, expected.token_ids);
  EXPECT_EQ(actual.finish_reason, expected.finish_reason);
  EXPECT_EQ(actual.text, expected.text);
  ASSERT_EQ(actual.logprobs.has_value(), expected.logprobs.has_value());
  if (!actual.logprobs) return;
  ASSERT_EQ(actual.logprobs->size(), expected.logprobs->size());
  for (size_t i = 0; i < actual.logprobs->size(); ++i) {
    const PositionLogprobs& a = (*actual.logprobs)[i];
    const PositionLogprobs& e = (*expected.logprobs)[i];
    EXPECT_EQ(a.token_id, e.token_id);
    EXPECT_EQ(a.logprob, e.logprob);
    EXPECT_EQ(a.rank, e.rank);
    ASSERT_EQ(a.top.size(), e.top.size());
    for (size_t j = 0; j < a.top.size(); ++j) {
      EXPECT_EQ(a.top[j].token_id, e.top[j].token_id);
      EXPECT_EQ(a.top[j].logprob, e.top[j].logprob);
    }
  }
}

inline void expect_same_outputs(const std::vector<RequestOutput>& actual,
                                const std::vector<RequestOutput>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) expect_same_output(actual[i], expected[i], i);
}

// Each request run alone through the plain reference loop.
inline std::vector<RequestOutput> reference_outputs(const Workload& workload, int max_model_len,
                                                    int vocab_size) {
  std::vector<RequestOutput> outputs;
  for (size_t i = 0; i < workload.prompts.size(); ++i) {
    outputs.push_back(reference_generate(workload.prompts[i], workload.params[i], kEosTokenIds,
                                         max_model_len, vocab_size));
  }
  return outputs;
}

inline void check_pool(const LLMEngine& engine) {
  const Scheduler& scheduler = engine.scheduler();
  const std::vector<const Sequence*> holders = scheduler.sequences();
  EXPECT_NO_THROW(scheduler.block_manager().check_consistency(holders));
}

inline void expect_pool_empty(const LLMEngine& engine) {
  const BlockManager& blocks = engine.scheduler().block_manager();
  EXPECT_EQ(blocks.num_free_blocks(), blocks.num_blocks());
  for (int id = 0; id < blocks.num_blocks(); ++id) EXPECT_EQ(blocks.block(id).ref_count, 0);
  const std::vector<const Sequence*> nobody;
  EXPECT_NO_THROW(blocks.check_consistency(nobody));
}

}  // namespace nanovllm::testing
