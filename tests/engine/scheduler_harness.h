// Drives a Scheduler directly: sequences owned here, steps "executed" by appending a chosen
// token, and the block pool's consistency checked after every change.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "engine/scheduler.h"

namespace nanovllm::testing {

inline std::vector<int> iota_tokens(int count, int first = 1) {
  std::vector<int> tokens(count);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

inline SamplingParams long_generation(int max_tokens = 1000) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.ignore_eos = true;
  params.max_tokens = max_tokens;
  return params;
}

class SchedulerHarness {
 public:
  explicit SchedulerHarness(const SchedulerConfig& config) : scheduler(config) {}

  Sequence* add(std::vector<int> prompt, const SamplingParams& params = long_generation()) {
    seqs.push_back(std::make_unique<Sequence>(static_cast<int64_t>(seqs.size()), std::move(prompt),
                                              params, 0));
    scheduler.add(seqs.back().get());
    return seqs.back().get();
  }

  // schedule() plus a consistency check; returns a copy (the scheduler reuses its batch).
  ScheduledBatch schedule() {
    ScheduledBatch batch = scheduler.schedule();
    check();
    return batch;
  }

  // Completes `batch` as if the model sampled `token` for every sampling entry.
  std::vector<Sequence*> complete(const ScheduledBatch& batch, int token = 7) {
    std::vector<SampleResult> samples(batch.num_sampling());
    for (SampleResult& sample : samples) sample.token_id = token;
    std::vector<Sequence*> finished = scheduler.postprocess(batch, samples);
    check();
    return finished;
  }

  std::vector<Sequence*> step(int token = 7) { return complete(schedule(), token); }

  void check() const {
    const std::vector<const Sequence*> holders = scheduler.sequences();
    EXPECT_NO_THROW(scheduler.block_manager().check_consistency(holders));
  }

  Scheduler scheduler;
  std::vector<std::unique_ptr<Sequence>> seqs;
};

inline SchedulerConfig small_config(int num_blocks, int block_size, int max_num_batched_tokens,
                                    int max_num_seqs = 16, bool prefix_caching = true) {
  SchedulerConfig config;
  config.num_kvcache_blocks = num_blocks;
  config.block_size = block_size;
  config.max_num_batched_tokens = max_num_batched_tokens;
  config.max_num_seqs = max_num_seqs;
  config.enable_prefix_caching = prefix_caching;
  config.eos_token_ids = {0};
  config.max_model_len = 4096;
  return config;
}

}  // namespace nanovllm::testing
