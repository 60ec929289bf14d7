// What the engine needs from whatever runs the model: the scheduled batch goes in, one sampled
// token per sequence that reached its end comes out. The real one is ModelRunner; tests use
// a fake that needs no model.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "engine/sequence.h"
#include "nanovllm/request_output.h"

namespace nanovllm {

struct ScheduledSequence {
  Sequence* seq = nullptr;
  // This step computes tokens [seq->num_cached_tokens, seq->num_cached_tokens + num_new_tokens).
  int num_new_tokens = 0;
  // Whether those tokens reach the end of the sequence, so the step samples its next token.
  // False for a chunk of a prompt that is prefilled over several steps.
  bool samples = false;
  // >= 0: a decode step planned before the host has the sequence's last sample. The entry
  // decodes that token, which the device takes from row `input_row` of the samples of the step
  // started just before; its position is then num_tokens(), one past the tokens the host has.
  int input_row = -1;
};

struct ScheduledBatch {
  bool is_prefill = false;
  std::vector<ScheduledSequence> seqs;

  bool empty() const { return seqs.empty(); }
  int num_tokens() const {
    int total = 0;
    for (const ScheduledSequence& entry : seqs) total += entry.num_new_tokens;
    return total;
  }
  int num_sampling() const {
    int total = 0;
    for (const ScheduledSequence& entry : seqs) total += entry.samples ? 1 : 0;
    return total;
  }
};

struct SampleResult {
  int token_id = 0;
  std::optional<PositionLogprobs> logprobs;  // when the sequence asked for logprobs
  // Why this row has no token (e.g. every logit was NaN): that request fails, the others go on.
  std::string error;
};

// The KV cache geometry and model limits the scheduler must respect.
struct ExecutorLimits {
  int num_kvcache_blocks = 0;
  int block_size = 0;
  int vocab_size = 0;
  int max_model_len = 0;  // the engine's max_model_len already clamped to the model's
};

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;

  virtual ExecutorLimits limits() const = 0;

  // Runs one step: writes the K/V of every scheduled token into the sequences' blocks and
  // samples (with each sequence's params and random stream) one token for every entry with
  // `samples`, in batch order, into `samples_out` (cleared first). A row that cannot be sampled
  // gets SampleResult::error; an exception means the step as a whole failed.
  virtual void execute(const ScheduledBatch& batch, std::vector<SampleResult>& samples_out) = 0;

  // How long the last execute() (or finish()) blocked waiting for the device, so the engine can
  // tell host time from device time. An executor that computes on the host never waits.
  virtual double last_step_device_wait_seconds() const { return 0.0; }

  // Running ahead: start() enqueues a step and returns without waiting for it, so the host can
  // plan and start the next one (whose entries may have input_row set) while the device works;
  // finish() waits for the oldest started step and returns its samples, as execute() does.
  // Executors that cannot run ahead say so, and then only execute() is called.
  virtual bool can_run_ahead() const { return false; }
  virtual void start(const ScheduledBatch& /*batch*/) { throw Error("executor cannot run ahead"); }
  virtual void finish(std::vector<SampleResult>& /*samples_out*/) {
    throw Error("executor cannot run ahead");
  }
};

}  // namespace nanovllm
