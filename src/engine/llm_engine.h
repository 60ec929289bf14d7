// The engine loop: requests in, scheduled steps through a ModelExecutor, outputs out.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/model_executor.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "nanovllm/engine_config.h"
#include "nanovllm/generate_stats.h"
#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"
#include "nanovllm/token_text_decoder.h"

namespace nanovllm {

struct StepResult {
  std::vector<RequestOutput> finished;  // requests that finished (or were rejected)
  int num_prefill_tokens = 0;           // prompt tokens this step computed
  int num_decode_tokens = 0;            // tokens this step decoded
  double device_wait_seconds = 0;       // how long the executor blocked on the device
};

class LLMEngine {
 public:
  // `eos_token_ids`: every id ends a sequence (unless it ignores EOS). Without a decoder
  // factory outputs carry no text and requests with stop strings are rejected.
  LLMEngine(const EngineConfig& config, std::unique_ptr<ModelExecutor> executor,
            std::vector<int> eos_token_ids, TokenTextDecoderFactory decoder_factory = nullptr);

  // Queues a request and returns its id. A request that cannot run (invalid params, empty or
  // too long prompt, token ids outside the vocabulary, a prompt the KV cache can never hold)
  // is not queued: it comes back from the next step() with `error` set. Never throws for
  // a bad request.
  int64_t add_request(std::vector<int> prompt_token_ids, const SamplingParams& params);

  // Why add_request() would reject this request, or nullopt.
  std::optional<std::string> check_request(const std::vector<int>& prompt_token_ids,
                                           const SamplingParams& params) const;

  StepResult step();
  bool is_finished() const { return scheduler_->is_finished() && rejected_.empty(); }

  // Ends every request in flight, freeing their KV blocks: returns the rejected requests not
  // yet returned by step() as they are, then the others with `error` set to `reason`.
  std::vector<RequestOutput> abort_all(const std::string& reason);

  // Called with a prompt's index as soon as its output is final.
  using OutputCallback = std::function<void(size_t index, const RequestOutput& output)>;
  // Polled between steps: a non-empty reason stops generate() (see abort_all).
  using StopPoll = std::function<std::string()>;

  // Runs the prompts to completion and returns their outputs in input order. `params` holds
  // one entry for all prompts or one per prompt. The engine must be idle, and is idle again
  // when generate() returns or throws.
  std::vector<RequestOutput> generate(const std::vector<std::vector<int>>& prompts,
                                      const std::vector<SamplingParams>& params,
                                      bool use_progress = true,
                                      const OutputCallback& on_output = nullptr,
                                      const StopPoll& should_stop = nullptr);
  std::vector<RequestOutput> generate(const std::vector<std::vector<int>>& prompts,
                                      const SamplingParams& params, bool use_progress = true);

  const EngineConfig& config() const { return config_; }
  // The longest sequence allowed: max_model_len clamped to the model and the KV cache.
  int max_model_len() const { return scheduler_->max_model_len(); }
  const ExecutorLimits& limits() const { return limits_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  // The statistics of the last generate() call.
  const GenerateStats& last_generate_stats() const { return last_generate_stats_; }

 private:
  RequestOutput take_output(Sequence& seq);

  EngineConfig config_;
  std::unique_ptr<ModelExecutor> executor_;
  ExecutorLimits limits_;
  TokenTextDecoderFactory decoder_factory_;
  std::unique_ptr<Scheduler> scheduler_;
  std::mt19937_64 rng_;  // seeds requests that bring no seed
  int64_t next_request_id_ = 0;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> sequences_;
  std::vector<RequestOutput> rejected_;
  std::vector<SampleResult> samples_;
  int consecutive_empty_steps_ = 0;
  GenerateStats last_generate_stats_;
};

}  // namespace nanovllm
