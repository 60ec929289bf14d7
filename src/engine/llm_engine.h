// The engine loop: requests in, scheduled steps through a ModelExecutor, outputs out.
#pragma once

#include <cstdint>
#include <deque>
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
  std::vector<RequestOutput> finished;  // requests that finished (or were rejected, or failed)
  int num_prefill_tokens = 0;           // prompt tokens this step computed
  int num_decode_tokens = 0;            // tokens this step decoded
  double device_wait_seconds = 0;       // how long the executor blocked on the device
};

// Callbacks for one LLMEngine::generate() call, run on the calling thread; as GenerateHooks in
// nanovllm/llm.h, with `index` the position in generate()'s prompts.
struct GenerateCallbacks {
  std::function<void(size_t index, const RequestOutput& output)> on_output;
  std::function<std::string()> should_stop;  // a non-empty reason stops generate()
};

// One request's trouble fails that request alone (Scheduler); an exception from a step as a whole
// (the device, memory for the batch) makes generate() fail every unfinished request with it.
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
  bool is_finished() const {
    return scheduler_->is_finished() && ready_.empty() && in_flight_.empty();
  }
  // Requests added and not yet returned by step() or abort_all().
  size_t num_unfinished() const { return sequences_.size() + ready_.size(); }

  // Ends every unfinished request: queued ones fail with `reason` and free their blocks;
  // rejected ones keep their own error. Returns their outputs.
  std::vector<RequestOutput> abort_all(const std::string& reason);
  // Ends one unfinished request: a queued one fails with `reason` and frees its blocks; a
  // rejected one keeps its own error. Returns its output, or nullopt for an id that is not
  // unfinished (already returned, or never added).
  std::optional<RequestOutput> abort_request(int64_t id, const std::string& reason);

  // An unfinished request's sequence (its tokens and text so far), or nullptr when the id is
  // not queued. Valid until the next step(), abort_request() or abort_all().
  const Sequence* sequence(int64_t id) const;

  // Runs the prompts to completion and returns their outputs in input order. `params` holds
  // one entry for all prompts or one per prompt. The engine must be idle, and is idle again
  // when generate() returns or throws (a callback's exception is passed on).
  std::vector<RequestOutput> generate(const std::vector<std::vector<int>>& prompts,
                                      const std::vector<SamplingParams>& params,
                                      bool use_progress = true,
                                      const GenerateCallbacks& callbacks = {});
  std::vector<RequestOutput> generate(const std::vector<std::vector<int>>& prompts,
                                      const SamplingParams& params, bool use_progress = true);

  // A seam for fault-injection tests (BlockAllocationHook).
  void set_allocation_hook(BlockAllocationHook hook) {
    scheduler_->set_allocation_hook(std::move(hook));
  }

  const EngineConfig& config() const { return config_; }
  // The longest sequence allowed: max_model_len clamped to the model and the KV cache.
  int max_model_len() const { return scheduler_->max_model_len(); }
  const ExecutorLimits& limits() const { return limits_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  // The statistics of the last generate() call.
  const GenerateStats& last_generate_stats() const { return last_generate_stats_; }

 private:
  RequestOutput take_output(Sequence& seq);
  // Whether `batch` may run ahead: the next step planned and started before its samples are in.
  bool runs_ahead(const ScheduledBatch& batch) const;
  // After `batch`'s samples are in samples_: postprocesses it into `result` and ready_.
  void complete(const ScheduledBatch& batch, StepResult& result);
  // Finishes and applies every step in flight.
  void drain_in_flight();
  // Outputs of sequences the scheduler is done with, which the engine then forgets.
  void take_outputs(const std::vector<Sequence*>& seqs, std::vector<RequestOutput>& outputs);
  // The loop of generate(): steps until every request is out or should_stop asks to stop.
  void run_to_completion(const std::unordered_map<int64_t, size_t>& index_of,
                         std::vector<RequestOutput>& outputs, bool use_progress,
                         const GenerateCallbacks& callbacks);

  EngineConfig config_;
  std::unique_ptr<ModelExecutor> executor_;
  ExecutorLimits limits_;
  TokenTextDecoderFactory decoder_factory_;
  std::unique_ptr<Scheduler> scheduler_;
  std::mt19937_64 rng_;  // seeds requests that bring no seed
  int64_t next_request_id_ = 0;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> sequences_;
  // Outputs the next step() returns: rejected requests, and requests that ended in a step that
  // then threw (so abort_all() still returns them).
  std::vector<RequestOutput> ready_;
  std::vector<SampleResult> samples_;
  // EngineConfig::async_scheduling, where the executor can run ahead.
  bool run_ahead_ = false;
  // Steps started and not yet finished, oldest first (at most two).
  std::deque<ScheduledBatch> in_flight_;
  int consecutive_empty_steps_ = 0;
  GenerateStats last_generate_stats_;
};

}  // namespace nanovllm
