// Tensor parallelism on the CPU backend beyond the goldens (engine_golden_test.cpp): a random
// model of 8 heads sharded over 1, 2, 4 and 8 in-process ranks samples the same tokens (greedy,
// seeded top-k/top-p) with the same log-probabilities; a model that does not split is a clear
// error; and a rank that fails, or hangs past the step timeout, ends every running request with
// an error rather than deadlocking, as does every later step.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "core/check.h"
#include "dist/in_process_group.h"
#include "engine/llm_engine.h"
#include "engine/tensor_parallel_executor.h"
#include "model/model_config.h"
#include "model_test_files.h"

namespace nanovllm {
namespace {

using std::chrono::milliseconds;

// Qwen3-shaped, random (dummy) weights: 8 query heads over 2 KV heads (replicated past 2
// ranks), 2 layers, a vocabulary of 512.
nlohmann::json eight_head_config() {
  nlohmann::json config = testing::tiny_config_json();
  config["num_attention_heads"] = 8;
  config["num_key_value_heads"] = 2;
  config["head_dim"] = 16;
  config["hidden_size"] = 64;
  config["intermediate_size"] = 96;
  config["vocab_size"] = 512;
  config["max_position_embeddings"] = 512;
  return config;
}

EngineConfig engine_config(int ranks) {
  EngineConfig config;
  config.device = "cpu";
  config.tensor_parallel_size = ranks;
  config.kvcache_block_size = 16;
  config.num_kvcache_blocks = 64;
  config.max_model_len = 256;
  return config;
}

using BackendFactory = TensorParallelExecutor::BackendFactory;

BackendFactory cpu_ranks() {
  return [](int, std::shared_ptr<Communicator> group) {
    return make_cpu_backend(1, std::move(group));
  };
}

std::unique_ptr<LLMEngine> sharded_engine(const std::filesystem::path& dir, int ranks,
                                          BackendFactory make_backend = cpu_ranks(),
                                          milliseconds step_timeout = milliseconds(300000)) {
  const EngineConfig config = engine_config(ranks);
  const ModelConfig model = load_model_config(dir);
  return std::make_unique<LLMEngine>(
      config,
      std::make_unique<TensorParallelExecutor>(config, dir, model, LoadFormat::kDummy,
                                               make_in_process_group(ranks),
                                               std::move(make_backend), step_timeout),
      std::vector<int>{});
}

std::vector<std::vector<int>> prompts() {
  return {{1, 2, 3}, {400, 17, 9, 9, 250, 3, 77}, {5}};
}

std::vector<SamplingParams> sampling() {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 24;
  greedy.ignore_eos = true;
  greedy.logprobs = 3;
  SamplingParams seeded = greedy;
  seeded.temperature = 0.8f;
  seeded.top_k = 40;
  seeded.top_p = 0.9f;
  seeded.seed = 1234;
  SamplingParams unseeded_top_p = seeded;
  unseeded_top_p.top_k = 0;
  unseeded_top_p.seed = 99;
  return {greedy, seeded, unseeded_top_p};
}

class TensorParallel : public ::testing::Test {
 protected:
  void SetUp() override { testing::write_json(dir_ / "config.json", eight_head_config()); }
  testing::TempDir dir_;
};

TEST_F(TensorParallel, EveryNumberOfRanksSamplesWhatOneRankSamples) {
  const std::vector<RequestOutput> one =
      sharded_engine(dir_.path(), 1)->generate(prompts(), sampling(), false);
  for (int ranks : {2, 4, 8}) {
    const std::vector<RequestOutput> sharded =
        sharded_engine(dir_.path(), ranks)->generate(prompts(), sampling(), false);
    ASSERT_EQ(sharded.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_TRUE(one[i].ok() && sharded[i].ok()) << one[i].error << sharded[i].error;
      EXPECT_EQ(sharded[i].token_ids, one[i].token_ids) << ranks << " ranks, request " << i;
      ASSERT_TRUE(one[i].logprobs && sharded[i].logprobs);
      for (size_t t = 0; t < one[i].logprobs->size(); ++t) {
        const PositionLogprobs& a = (*one[i].logprobs)[t];
        const PositionLogprobs& b = (*sharded[i].logprobs)[t];
        // The partial sums of the row-parallel layers add up in another order: float32's
        // rounding, no more.
        EXPECT_NEAR(a.logprob, b.logprob, 1e-4f) << ranks << " ranks, request " << i;
        ASSERT_EQ(a.top.size(), b.top.size());
        for (size_t k = 0; k < a.top.size(); ++k) {
          EXPECT_EQ(a.top[k].token_id, b.top[k].token_id);
          EXPECT_NEAR(a.top[k].logprob, b.top[k].logprob, 1e-4f);
        }
      }
    }
  }
}

TEST_F(TensorParallel, AModelThatDoesNotSplitIsAClearError) {
  const auto error_of = [&](int ranks) {
    try {
      sharded_engine(dir_.path(), ranks);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of(3).find("the 8 attention heads do not split over 3 ranks"), std::string::npos)
      << error_of(3);
  nlohmann::json config = eight_head_config();
  config["intermediate_size"] = 100;
  testing::write_json(dir_ / "config.json", config);
  EXPECT_NE(error_of(8).find("the MLP's 100 columns do not split over 8 ranks"), std::string::npos)
      << error_of(8);
}

// Rank `rank`'s collectives, through which a failure or a hang is injected at its `at`-th
// all-reduce.
class FaultyRank final : public Communicator {
 public:
  enum class Fault { kThrow, kHang };
  FaultyRank(std::shared_ptr<Communicator> inner, Fault fault, int at)
      : inner_(std::move(inner)), fault_(fault), at_(at) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void all_reduce_sum(Tensor x, void* stream) override {
    if (++calls_ == at_) {
      if (fault_ == Fault::kThrow) throw Error("injected: the device fell off the bus");
      std::unique_lock lock(mutex_);
      released_.wait(lock, [this] { return release_; });
    }
    inner_->all_reduce_sum(x, stream);
  }
  void all_gather_columns(const Tensor& x, Tensor out, void* stream) override {
    inner_->all_gather_columns(x, out, stream);
  }
  void abort(const std::string& reason) override { inner_->abort(reason); }

  void release() {
    {
      std::lock_guard lock(mutex_);
      release_ = true;
    }
    released_.notify_all();
  }

 private:
  std::shared_ptr<Communicator> inner_;
  const Fault fault_;
  const int at_;
  int calls_ = 0;
  std::mutex mutex_;
  std::condition_variable released_;
  bool release_ = false;
};

// Rank 1 of 4 faulty from its 20th all-reduce, in the first steps after start-up.
std::unique_ptr<LLMEngine> engine_with_faulty_rank(const std::filesystem::path& dir,
                                                   FaultyRank::Fault fault,
                                                   std::shared_ptr<FaultyRank>& faulty,
                                                   milliseconds step_timeout) {
  return sharded_engine(
      dir, 4,
      [&faulty, fault](int rank, std::shared_ptr<Communicator> group) {
        if (rank == 1) {
          faulty = std::make_shared<FaultyRank>(std::move(group), fault, 20);
          return make_cpu_backend(1, faulty);
        }
        return make_cpu_backend(1, std::move(group));
      },
      step_timeout);
}

void expect_every_request_failed(const std::vector<RequestOutput>& outputs,
                                 const std::string& words) {
  ASSERT_EQ(outputs.size(), prompts().size());
  for (const RequestOutput& output : outputs) {
    EXPECT_FALSE(output.ok());
    EXPECT_NE(output.error.find(words), std::string::npos) << output.error;
  }
}

TEST_F(TensorParallel, ARankThatFailsEndsTheRequestsAndEveryLaterStep) {
  std::shared_ptr<FaultyRank> faulty;
  auto engine =
      engine_with_faulty_rank(dir_.path(), FaultyRank::Fault::kThrow, faulty, milliseconds(300000));
  expect_every_request_failed(engine->generate(prompts(), sampling(), false),
                              "rank 1 failed: injected: the device fell off the bus");
  // The group is broken for good: later requests fail at once, naming the first failure.
  expect_every_request_failed(engine->generate(prompts(), sampling(), false), "runs no more steps");
}

TEST_F(TensorParallel, ARankThatHangsPastTheStepTimeoutEndsTheRequests) {
  std::shared_ptr<FaultyRank> faulty;
  auto engine =
      engine_with_faulty_rank(dir_.path(), FaultyRank::Fault::kHang, faulty, milliseconds(500));
  // Rank 1 never reaches its all-reduce: the others wait in theirs until the executor gives up
  // on the step and aborts the group.
  expect_every_request_failed(engine->generate(prompts(), sampling(), false),
                              "did not finish on every rank within 0.5 s (stuck: rank 1)");
  expect_every_request_failed(engine->generate(prompts(), sampling(), false), "runs no more steps");
  faulty->release();  // so that its thread can end with the executor
}

}  // namespace
}  // namespace nanovllm
