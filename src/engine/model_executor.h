// What the engine needs from whatever runs the model: the scheduled batch goes in, one sampled
// token per sequence that reached its end comes out. The real one is ModelRunner; tests use
// a fake that needs no model.
#pragma once

#include <optional>
#include <string>
#include <vector>

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

  // How long the last execute() blocked waiting for the device, so the engine can tell host time
  // from device time. An executor that computes on the host never waits.
  virtual double last_step_device_wait_seconds() const { return 0.0; }
};

}  // namespace nanovllm
