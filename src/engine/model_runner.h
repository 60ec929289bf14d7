// Runs scheduled batches through a CausalLM on a Backend, as nano-vllm's ModelRunner does: owns
// the paged KV cache (sized from free device memory after a warm-up forward on the GPU), lays
// out each step's inputs in preallocated buffers, replays captured graphs for decode batches,
// and samples on the backend's device so only token ids (and requested logprobs) reach the host.
#pragma once

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "core/buffer.h"
#include "engine/batch_inputs.h"
#include "engine/kv_cache_sizing.h"
#include "engine/model_executor.h"
#include "engine/step_inputs.h"
#include "kernels/backend.h"
#include "model/causal_lm.h"
#include "nanovllm/engine_config.h"

namespace nanovllm {

class ModelRunner final : public ModelExecutor {
 public:
  // `backend` and `model` must outlive the runner. Sizes the KV cache unless
  // config.num_kvcache_blocks gives its block count, then captures the decode graphs unless
  // config.enforce_eager (or the backend has no graphs). Over a tensor-parallel group (one
  // runner a rank) `agree_on_kv_blocks` turns this rank's block count into the group's: the
  // fewest any rank can hold.
  ModelRunner(const EngineConfig& config, Backend& backend, CausalLM& model,
              const std::function<int(int)>& agree_on_kv_blocks = nullptr);

  ExecutorLimits limits() const override { return limits_; }
  void execute(const ScheduledBatch& batch, std::vector<SampleResult>& samples_out) override;
  double last_step_device_wait_seconds() const override { return device_wait_seconds_; }
  // Up to two steps in flight: the engine finishes one before it starts a third.
  bool can_run_ahead() const override { return true; }
  void start(const ScheduledBatch& batch) override;
  void finish(std::vector<SampleResult>& samples_out) override;
  // start() of a step already laid out as plain data (by this runner, or, over a
  // tensor-parallel group, by the executor for every rank).
  void start(const BatchInputs& step);

  size_t kv_cache_bytes() const { return kv_buffer_.bytes(); }
  // Decode batch sizes with a captured graph, ascending.
  std::vector<int> graph_batch_sizes() const;

 private:
  struct DecodeGraph {
    int batch_size = 0;
    std::unique_ptr<CapturedGraph> graph;
    Tensor logits;  // f32 [batch_size, vocab], written by each replay
  };

  int choose_num_kvcache_blocks(const EngineConfig& config);
  int gpu_blocks_after_warmup(const EngineConfig& config);
  std::vector<LayerKVCache> make_kv_views(const Buffer& buffer, int num_blocks) const;
  void capture_decode_graphs(const EngineConfig& config);
  const DecodeGraph* graph_for(const BatchInputs& step) const;

  // A step started and not finished: what finish() needs to hand back its samples.
  struct StartedStep {
    int rows = 0;         // sampled rows
    int host_slot = 0;    // host_tokens_[host_slot] receives the tokens
    uint64_t ticket = 0;  // of that download
    // With logprobs the step was waited for in start(): its samples, and the wait.
    bool complete = false;
    std::vector<SampleResult> samples;
    double device_wait_seconds = 0.0;
  };
  // Samples `logits` (the first rows of `inputs`) into sample_out_ and queues the tokens'
  // download; with logprobs, waits and fills step.samples.
  void sample(const BatchInputs& inputs, const Tensor& logits, StartedStep& step);

  Backend& backend_;
  CausalLM& model_;
  ExecutorLimits limits_;
  KVCacheShape kv_shape_;
  Buffer kv_buffer_;                    // K and V of every layer, one allocation
  std::vector<LayerKVCache> kv_cache_;  // per layer: [num_blocks, block_size, kv_heads, head_dim]
  BatchInputs host_inputs_;
  StepInputs step_inputs_;
  std::vector<DecodeGraph> graphs_;  // ascending batch size
  // Sampled tokens and logprobs on the device: i32 [S] ids and ranks, f32 [S] logprobs,
  // i32/f32 [S, kMaxLogprobs] top ids and logprobs.
  Buffer sample_out_;
  // Sampled tokens on the host, one buffer per step in flight (page-locked: downloaded into
  // every step).
  std::array<std::vector<int32_t>, 2> host_tokens_;
  std::array<HostPin, 2> host_tokens_pins_;
  std::vector<int32_t> host_ranks_, host_top_ids_;
  std::vector<float> host_logprobs_, host_top_logprobs_;
  std::deque<StartedStep> started_;
  int64_t steps_started_ = 0;
  int last_sampled_rows_ = 0;  // of the last step started: what input_row entries may name
  double device_wait_seconds_ = 0.0;
};

}  // namespace nanovllm
