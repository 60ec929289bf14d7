// A model stand-in for engine tests. It keeps a simulated paged KV cache: every scheduled
// token is "stored" in its slot, and before sampling each sequence's whole history is read
// back through its block table and checked (right token at every position, and cached
// positions written in an earlier step). Its logits are a hash of that history, so any
// scheduling, caching or preemption mistake changes the output.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "engine/model_executor.h"
#include "engine/sampler.h"
#include "nanovllm/request_output.h"

namespace nanovllm::testing {

// Pseudo-random logits in [-4, 4), a function of the whole token history. fp32 [vocab]
std::vector<float> fake_logits(std::span<const int> history, int vocab);

struct RecordedEntry {
  int64_t seq_id = 0;
  int num_cached_tokens = 0;  // before the step (for an entry planned ahead, as if applied)
  int num_new_tokens = 0;
  bool samples = false;
  bool ahead = false;  // planned before the step before was applied (input_row set)
};

struct RecordedStep {
  bool is_prefill = false;
  std::vector<RecordedEntry> entries;
};

// Faults a test injects into the fake model.
struct ExecutorFaults {
  // Called before each step; what it throws fails the step as a whole (a device error).
  std::function<void(const ScheduledBatch& batch)> before_step;
  // May change a sequence's logits fp32 [vocab] before its token is sampled (e.g. to NaN).
  std::function<void(const Sequence& seq, std::vector<float>& logits)> on_logits;
};

class FakeExecutor final : public ModelExecutor {
 public:
  FakeExecutor(int num_kvcache_blocks, int block_size, int vocab_size, int max_model_len);

  ExecutorLimits limits() const override { return limits_; }
  // As ModelRunner: a row that cannot be sampled gets SampleResult::error.
  void execute(const ScheduledBatch& batch, std::vector<SampleResult>& samples_out) override;
  // As ModelRunner, up to two steps in flight; an entry with input_row set decodes the token
  // the step started before sampled in that row.
  bool can_run_ahead() const override { return true; }
  void start(const ScheduledBatch& batch) override;
  void finish(std::vector<SampleResult>& samples_out) override;

  const std::vector<RecordedStep>& steps() const { return steps_; }
  ExecutorFaults& faults() { return faults_; }

 private:
  struct Slot {
    int token = -1;
    int position = -1;
    int64_t step = -1;  // the step that wrote it
  };
  Slot& slot(const Sequence& seq, int position);

  ExecutorLimits limits_;
  ExecutorFaults faults_;
  std::vector<Slot> slots_;  // [num_blocks * block_size]
  int64_t step_ = 0;
  std::vector<RecordedStep> steps_;
  std::deque<std::vector<SampleResult>> started_;  // samples of the steps in flight
  std::vector<SampleResult> last_samples_;         // of the last step started
};

// What a request generates when run alone, by a plain loop over fake_logits: the reference
// the engine's outputs are compared with. `params.seed` must be set unless greedy.
RequestOutput reference_generate(const std::vector<int>& prompt, const SamplingParams& params,
                                 const std::vector<int>& eos_token_ids, int max_model_len,
                                 int vocab_size);

}  // namespace nanovllm::testing
