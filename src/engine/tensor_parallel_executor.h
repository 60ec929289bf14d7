// The model sharded over a tensor-parallel group: one thread a rank, each with its own backend
// (made on that thread), shard of the model, KV cache and ModelRunner. The engine's thread lays
// each step out once as plain data (BatchInputs), and every rank runs that step, their
// collectives meeting in the backends; every rank samples the same tokens from the same
// gathered logits, and rank 0's go back to the engine.
//
// Threads rather than processes: one address space needs no transport for the step's inputs
// and no second copy of the host side, a rank's thread keeps its device current, and the
// collectives need no rendezvous. A step goes to the ranks as plain data all the same, so that
// ranks in other processes or hosts would be a change of transport only.
//
// A rank that fails, or does not finish a step within the step timeout, aborts the group: that
// step and every later one throw its error (the engine ends the requests it was running with
// it), and nothing waits forever.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "engine/batch_inputs.h"
#include "engine/model_executor.h"
#include "kernels/backend.h"
#include "model/model_config.h"
#include "model/weight_loading.h"
#include "nanovllm/engine_config.h"

namespace nanovllm {

class TensorParallelExecutor final : public ModelExecutor {
 public:
  // Makes rank `rank`'s backend, on that rank's thread, as a member of `group`.
  using BackendFactory =
      std::function<std::unique_ptr<Backend>(int rank, std::shared_ptr<Communicator> group)>;

  static constexpr std::chrono::milliseconds kDefaultStepTimeout = std::chrono::minutes(5);

  // One rank for each communicator of `group` (config.tensor_parallel_size of them), each
  // loading its shard of the model in `model_dir`. Throws the first rank's Error when a rank
  // cannot start (a model that does not split over the ranks, a bad checkpoint, no memory).
  TensorParallelExecutor(const EngineConfig& config, const std::filesystem::path& model_dir,
                         const ModelConfig& model_config, LoadFormat format,
                         std::vector<std::shared_ptr<Communicator>> group,
                         BackendFactory make_backend,
                         std::chrono::milliseconds step_timeout = kDefaultStepTimeout);
  ~TensorParallelExecutor() override;
  TensorParallelExecutor(const TensorParallelExecutor&) = delete;
  TensorParallelExecutor& operator=(const TensorParallelExecutor&) = delete;

  ExecutorLimits limits() const override { return limits_; }
  void execute(const ScheduledBatch& batch, std::vector<SampleResult>& samples_out) override;
  double last_step_device_wait_seconds() const override { return device_wait_seconds_; }
  bool can_run_ahead() const override { return true; }
  void start(const ScheduledBatch& batch) override;
  void finish(std::vector<SampleResult>& samples_out) override;

  int size() const { return static_cast<int>(ranks_.size()); }
  // Rank 0's device memory.
  DeviceMemoryInfo memory_info() const;

 private:
  struct Rank;
  // Runs job(rank) on every rank's thread and waits for all of them, within `timeout`. A job
  // that throws, or a rank that does not finish in time, aborts the group and marks the
  // executor broken; this then throws that error.
  void on_every_rank(const std::function<void(int rank)>& job, std::chrono::milliseconds timeout,
                     const char* what);
  void throw_if_broken() const;
  // Lets every rank finish its queued jobs, release what its thread made, and joins it.
  void stop_ranks();

  std::vector<std::shared_ptr<Communicator>> group_;
  std::vector<std::shared_ptr<Rank>> ranks_;
  std::chrono::milliseconds step_timeout_;
  ExecutorLimits limits_;
  BatchInputs step_;  // the step being started, laid out once for every rank
  std::vector<std::vector<SampleResult>> rank_samples_;  // what ranks other than 0 sampled
  double device_wait_seconds_ = 0.0;
  std::string broken_;  // why the group cannot run steps any more ("" while it can)
};

}  // namespace nanovllm
