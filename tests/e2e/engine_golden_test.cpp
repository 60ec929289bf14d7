// The whole engine against the transformers goldens: greedy outputs must be the reference
// continuations whatever the caching, preemption, chunking, block size, arrival order or number
// of tensor-parallel ranks. Each
// case also asserts that the mechanism it is about actually happened.
//
// The backend comes from the environment: NANOVLLM_TEST_DEVICE=cuda runs the CUDA backend in
// float32 (skipped where no CUDA device is visible), with decode graphs unless
// NANOVLLM_TEST_ENFORCE_EAGER=1; otherwise the CPU backend.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "dist/in_process_group.h"
#include "engine/llm_engine.h"
#include "engine/model_runner.h"
#include "engine/tensor_parallel_executor.h"
#include "kernels/backend.h"
#include "model/decoder/decoder_model.h"
#include "model/decoder/decoder_weights.h"
#include "model/model_config.h"

namespace nanovllm {
namespace {

// Golden steps whose top-1/top-2 margin is below this are near-ties the fp32 CPU model may
// resolve either way; a request stops before its first such step.
constexpr float kTieMargin = 1e-4f;

struct GoldenRequest {
  std::vector<int> prompt;
  std::vector<int> expected;  // reference greedy tokens up to the first near-tie
};

bool test_on_cuda() {
  const char* device = std::getenv("NANOVLLM_TEST_DEVICE");
  return device != nullptr && std::string(device) == "cuda";
}

bool test_enforce_eager() {
  const char* eager = std::getenv("NANOVLLM_TEST_ENFORCE_EAGER");
  return eager != nullptr && std::string(eager) == "1";
}

std::unique_ptr<Backend> test_backend() {
  return test_on_cuda() ? make_cuda_backend(DType::kF32) : make_cpu_backend();
}

std::string model_dir(const std::string& name) {
  return std::string(NANOVLLM_TEST_DATA_DIR) + "/models/" + name;
}

std::vector<GoldenRequest> load_requests(const std::string& name) {
  std::ifstream file(model_dir(name) + "/golden.json");
  const nlohmann::json golden = nlohmann::json::parse(file);
  std::vector<GoldenRequest> requests;
  for (const auto& prompt_case : golden["prompts"]) {
    GoldenRequest request{prompt_case["token_ids"].get<std::vector<int>>(), {}};
    const auto& steps = prompt_case["greedy_steps"];
    for (size_t i = 0; i < steps.size() && steps[i]["margin"].get<float>() >= kTieMargin; ++i) {
      request.expected.push_back(prompt_case["greedy_token_ids"][i].get<int>());
    }
    if (!request.expected.empty()) requests.push_back(std::move(request));
  }
  return requests;
}

// A loaded model shared by every engine a test builds.
struct LoadedModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<DecoderModel> model;
  std::vector<int> eos_token_ids;

  explicit LoadedModel(const std::string& name) : backend(test_backend()) {
    const ModelConfig config = load_model_config(model_dir(name));
    model = std::make_unique<DecoderModel>(
        config, load_decoder_weights(model_dir(name), config, *backend, LoadFormat::kSafetensors),
        *backend);
    eos_token_ids = load_generation_config(model_dir(name), config).eos_token_ids;
  }

  std::unique_ptr<LLMEngine> engine(const EngineConfig& config) {
    return std::make_unique<LLMEngine>(
        config, std::make_unique<ModelRunner>(config, *backend, *model), eos_token_ids);
  }
};

SamplingParams greedy(int max_tokens) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.ignore_eos = true;
  params.max_tokens = max_tokens;
  return params;
}

EngineConfig base_config(int block_size, int num_blocks) {
  EngineConfig config;
  config.kvcache_block_size = block_size;
  config.num_kvcache_blocks = num_blocks;
  config.max_model_len = 1024;
  config.enforce_eager = test_enforce_eager();
  return config;
}

void expect_golden(const std::vector<GoldenRequest>& requests,
                   const std::vector<RequestOutput>& outputs, const std::string& where) {
  ASSERT_EQ(outputs.size(), requests.size()) << where;
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(outputs[i].ok()) << where << ": " << outputs[i].error;
    EXPECT_EQ(outputs[i].prompt_token_ids, requests[i].prompt) << where << " request " << i;
    EXPECT_EQ(outputs[i].token_ids, requests[i].expected)
        << where << " request " << i << " (prompt of " << requests[i].prompt.size() << ")";
    EXPECT_EQ(outputs[i].finish_reason, "length") << where;
  }
}

// All requests at once through generate().
std::vector<RequestOutput> run_all_at_once(LLMEngine& engine,
                                           const std::vector<GoldenRequest>& requests) {
  std::vector<std::vector<int>> prompts;
  std::vector<SamplingParams> params;
  for (const GoldenRequest& request : requests) {
    prompts.push_back(request.prompt);
    params.push_back(greedy(static_cast<int>(request.expected.size())));
  }
  return engine.generate(prompts, params, false);
}

// Requests arriving one by one, a new one every two steps, while the others run.
std::vector<RequestOutput> run_one_by_one(LLMEngine& engine,
                                          const std::vector<GoldenRequest>& requests) {
  std::vector<RequestOutput> outputs(requests.size());
  std::vector<int64_t> ids;
  size_t next = 0, done = 0;
  for (int step = 0; done < requests.size(); ++step) {
    if (next < requests.size() && step % 2 == 0) {
      const GoldenRequest& request = requests[next++];
      ids.push_back(
          engine.add_request(request.prompt, greedy(static_cast<int>(request.expected.size()))));
    }
    for (RequestOutput& output : engine.step().finished) {
      const size_t index = std::find(ids.begin(), ids.end(), output.request_id) - ids.begin();
      outputs[index] = std::move(output);
      ++done;
    }
  }
  return outputs;
}

class EngineGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test_on_cuda() && !cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
  static void SetUpTestSuite() {
    if (test_on_cuda() && !cuda_available()) return;
    untied_ = new LoadedModel("qwen3-tiny-untied");
    untied_requests_ = new std::vector<GoldenRequest>(load_requests("qwen3-tiny-untied"));
  }
  static void TearDownTestSuite() {
    delete untied_;
    delete untied_requests_;
  }
  static LoadedModel* untied_;
  static std::vector<GoldenRequest>* untied_requests_;
};
LoadedModel* EngineGolden::untied_ = nullptr;
std::vector<GoldenRequest>* EngineGolden::untied_requests_ = nullptr;

TEST_F(EngineGolden, WithAndWithoutPrefixCaching) {
  for (bool caching : {true, false}) {
    EngineConfig config = base_config(16, 256);
    config.enable_prefix_caching = caching;
    auto engine = untied_->engine(config);
    // Twice through the same engine: the second pass finds every full prompt block cached.
    expect_golden(*untied_requests_, run_all_at_once(*engine, *untied_requests_), "first pass");
    expect_golden(*untied_requests_, run_all_at_once(*engine, *untied_requests_), "second pass");
    if (caching) {
      EXPECT_GT(engine->scheduler().stats().num_prefix_hit_tokens, 1000);
    } else {
      EXPECT_EQ(engine->scheduler().stats().num_prefix_hit_tokens, 0);
    }
  }
}

TEST_F(EngineGolden, UnderPreemptionWithATinyKVPool) {
  // 35 blocks of 16 tokens: the longest request (544 tokens, 34 blocks) fits alone, and the
  // requests admitted beside it run out of blocks as they grow.
  auto engine = untied_->engine(base_config(16, 35));
  expect_golden(*untied_requests_, run_all_at_once(*engine, *untied_requests_), "tiny pool");
  EXPECT_GT(engine->scheduler().stats().num_preemptions, 0);
}

TEST_F(EngineGolden, WithChunkedPrefill) {
  EngineConfig config = base_config(16, 256);
  config.max_num_batched_tokens = 48;
  auto engine = untied_->engine(config);
  expect_golden(*untied_requests_, run_all_at_once(*engine, *untied_requests_), "chunked");
  EXPECT_GT(engine->scheduler().stats().num_partial_prefills, 0);
}

TEST_F(EngineGolden, AcrossBlockSizes) {
  for (int block_size : {16, 64, 256}) {
    auto engine = untied_->engine(base_config(block_size, 4096 / block_size * 2));
    expect_golden(*untied_requests_, run_all_at_once(*engine, *untied_requests_),
                  "block size " + std::to_string(block_size));
  }
}

TEST_F(EngineGolden, OneByOneArrivalEqualsAllAtOnce) {
  auto engine = untied_->engine(base_config(16, 256));
  expect_golden(*untied_requests_, run_one_by_one(*engine, *untied_requests_), "one by one");
  // The 300-token prompt shares 270 tokens with the 520-token one that came before it.
  EXPECT_GT(engine->scheduler().stats().num_prefix_hit_tokens, 0);
}

TEST(EngineGoldenTied, RealVocabularyTiedModel) {
  if (test_on_cuda() && !cuda_available()) GTEST_SKIP() << "no CUDA device";
  LoadedModel tied("qwen3-tiny-tied");
  const std::vector<GoldenRequest> requests = load_requests("qwen3-tiny-tied");
  auto engine = tied.engine(base_config(16, 128));
  expect_golden(requests, run_all_at_once(*engine, requests), "tied");
}

// The other families of the decoder: Qwen2 (q/k/v biases), Llama (llama3 rotary scaling, tied
// embeddings, one KV head) and Qwen3-MoE (experts, one dense layer), through the engine with
// prefix caching.
TEST(EngineGoldenFamilies, OtherFamiliesGiveTheReferenceContinuations) {
  if (test_on_cuda() && !cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (const char* name : {"qwen2-tiny", "llama-tiny", "qwen3-moe-tiny"}) {
    LoadedModel model(name);
    const std::vector<GoldenRequest> requests = load_requests(name);
    auto engine = model.engine(base_config(16, 128));
    expect_golden(requests, run_all_at_once(*engine, requests), name);
  }
}

// The model sharded over 2, 4 and 8 ranks, under preemption and chunked prefill: the same
// reference continuations. On the CPU the ranks are threads over an in-process group; on CUDA
// (float32) GPUs 0 to N - 1 through NCCL, where that many are visible. (The tied model's 4 heads
// split over 2 and 4 ranks; the untied model's 8 heads and 2 KV heads, replicated past 2
// ranks, over all; Qwen2's biases split with their heads, Llama's one KV head replicated;
// each of Qwen3-MoE's experts split by columns as the dense MLP is.)
TEST(EngineGoldenTensorParallel, ShardedModelsGiveTheReferenceContinuations) {
  const bool gpu = test_on_cuda();
  if (gpu && !cuda_available()) GTEST_SKIP() << "no CUDA device";
  const std::pair<std::string, int> cases[] = {{"qwen3-tiny-tied", 2},   {"qwen3-tiny-tied", 4},
                                               {"qwen3-tiny-untied", 2}, {"qwen3-tiny-untied", 4},
                                               {"qwen3-tiny-untied", 8}, {"qwen2-tiny", 2},
                                               {"llama-tiny", 2},        {"qwen3-moe-tiny", 2}};
  int ran = 0;
  for (const auto& [name, ranks] : cases) {
    std::vector<std::shared_ptr<Communicator>> group;
    try {
      group = gpu ? make_gpu_group(ranks) : make_in_process_group(ranks);
    } catch (const Error& error) {
      std::printf("%s over %d ranks: not run (%s)\n", name.c_str(), ranks, error.what());
      continue;
    }
    const std::vector<GoldenRequest> requests = load_requests(name);
    const ModelConfig model = load_model_config(model_dir(name));
    EngineConfig config = base_config(16, 64);
    config.max_num_batched_tokens = 256;  // chunked prefill, and preemption in 64 blocks
    config.max_num_seqs = 16;             // fewer decode graphs to capture on every rank
    config.tensor_parallel_size = ranks;
    config.device = gpu ? "cuda" : "cpu";
    LLMEngine engine(config,
                     std::make_unique<TensorParallelExecutor>(
                         config, model_dir(name), model, LoadFormat::kSafetensors, group,
                         [gpu](int rank, std::shared_ptr<Communicator> rank_group) {
                           return gpu ? make_cuda_backend(DType::kF32, rank, std::move(rank_group))
                                      : make_cpu_backend(1, std::move(rank_group));
                         }),
                     load_generation_config(model_dir(name), model).eos_token_ids);
    expect_golden(requests, run_all_at_once(engine, requests),
                  name + " over " + std::to_string(ranks) + " ranks");
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "fewer than 2 GPUs";
}

}  // namespace
}  // namespace nanovllm
