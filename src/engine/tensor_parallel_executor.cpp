#include "engine/tensor_parallel_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>

#include "core/check.h"
#include "core/logging.h"
#include "engine/model_runner.h"
#include "model/model_registry.h"

namespace nanovllm {
namespace {

// Loading a large checkpoint's shards takes minutes, not a step's time.
constexpr auto kStartTimeout = std::chrono::minutes(30);
// After an abort, how long the other ranks get to leave their collectives (at most).
constexpr auto kAbortGrace = std::chrono::milliseconds(10000);

// The KV-cache blocks every rank takes: the fewest any rank can hold. Each rank's runner
// proposes its count and waits for the others'.
class BlockAgreement {
 public:
  explicit BlockAgreement(int size) : size_(size) {}

  int agree(int blocks) {
    std::unique_lock lock(mutex_);
    fewest_ = std::min(fewest_, blocks);
    if (++arrived_ == size_) changed_.notify_all();
    changed_.wait(lock, [this] { return arrived_ == size_ || !aborted_.empty(); });
    if (!aborted_.empty()) throw Error(aborted_);
    return fewest_;
  }

  void abort(const std::string& reason) {
    std::lock_guard lock(mutex_);
    if (aborted_.empty()) aborted_ = reason;
    changed_.notify_all();
  }

 private:
  const int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  int fewest_ = std::numeric_limits<int>::max();
  std::string aborted_;
};

// Jobs handed to the ranks and not yet done, and the first error among them.
struct PendingJobs {
  std::mutex mutex;
  std::condition_variable done;
  int remaining = 0;
  std::vector<bool> finished;  // by rank
  std::string error;
};

}  // namespace

// One rank: its thread, its queue of jobs, and the objects its thread made (and destroys).
struct TensorParallelExecutor::Rank {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<CausalLM> model;
  std::unique_ptr<ModelRunner> runner;

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::function<void()>> jobs;
  bool stopping = false;
  std::thread thread;

  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mutex);
      jobs.push_back(std::move(job));
    }
    wake.notify_one();
  }

  void run() {
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [this] { return stopping || !jobs.empty(); });
        if (jobs.empty()) break;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      job();
    }
    // Made on this thread, so released on it (a device's context is current here).
    runner.reset();
    model.reset();
    backend.reset();
  }
};

TensorParallelExecutor::TensorParallelExecutor(const EngineConfig& config,
                                               const std::filesystem::path& model_dir,
                                               const ModelConfig& model_config, LoadFormat format,
                                               std::vector<std::shared_ptr<Communicator>> group,
                                               BackendFactory make_backend,
                                               std::chrono::milliseconds step_timeout)
    : group_(std::move(group)),
      step_timeout_(step_timeout),
      step_(step_capacity(config,
                          config.resolved_max_model_len(model_config.max_position_embeddings))) {
  const int size = static_cast<int>(group_.size());
  NVLLM_CHECK_EQ(size, config.tensor_parallel_size);
  find_architecture(model_config).check_split(model_config, size);  // before any rank starts
  for (int r = 0; r < size; ++r) {
    NVLLM_CHECK_EQ(group_[r]->rank(), r);
    auto rank = std::make_shared<Rank>();
    rank->thread = std::thread([rank = rank.get()] { rank->run(); });
    ranks_.push_back(std::move(rank));
  }
  rank_samples_.resize(size);

  auto blocks = std::make_shared<BlockAgreement>(size);
  try {
    on_every_rank(
        [&, blocks](int r) {
          Rank& rank = *ranks_[r];
          try {
            rank.backend = make_backend(r, group_[r]);
            rank.model = load_causal_lm(model_dir, model_config, *rank.backend, format, {r, size});
            rank.runner = std::make_unique<ModelRunner>(
                config, *rank.backend, *rank.model,
                [blocks](int proposed) { return blocks->agree(proposed); });
          } catch (const std::exception& error) {
            blocks->abort(fmt::format("rank {} failed to start: {}", r, error.what()));
            throw;
          }
        },
        std::max<std::chrono::milliseconds>(step_timeout, kStartTimeout), "start-up");
  } catch (...) {
    stop_ranks();
    throw;
  }
  limits_ = ranks_[0]->runner->limits();
  NVLLM_LOG_INFO("tensor parallelism: {} ranks, each with {} KV blocks", size,
                 limits_.num_kvcache_blocks);
}

TensorParallelExecutor::~TensorParallelExecutor() {
  stop_ranks();
}

void TensorParallelExecutor::stop_ranks() {
  for (const std::shared_ptr<Rank>& rank : ranks_) {
    {
      std::lock_guard lock(rank->mutex);
      rank->stopping = true;
    }
    rank->wake.notify_one();
  }
  for (const std::shared_ptr<Rank>& rank : ranks_) rank->thread.join();
}

void TensorParallelExecutor::on_every_rank(const std::function<void(int rank)>& job,
                                           std::chrono::milliseconds timeout, const char* what) {
  auto pending = std::make_shared<PendingJobs>();
  pending->remaining = size();
  pending->finished.assign(size(), false);
  // The job outlives this call when a rank is left behind.
  auto shared_job = std::make_shared<std::function<void(int)>>(job);
  for (int r = 0; r < size(); ++r) {
    ranks_[r]->post([pending, shared_job, r, group = group_[r]] {
      try {
        (*shared_job)(r);
      } catch (const std::exception& failure) {
        const std::string error =
            fmt::format("tensor parallelism: rank {} failed: {}", r, failure.what());
        {
          // The first failure is the one to report; the ranks its abort wakes fail after it.
          std::lock_guard lock(pending->mutex);
          if (pending->error.empty()) pending->error = error;
        }
        group->abort(error);  // the other ranks leave the collectives they wait in
      }
      std::lock_guard lock(pending->mutex);
      pending->finished[r] = true;
      --pending->remaining;
      pending->done.notify_all();
    });
  }
  std::unique_lock lock(pending->mutex);
  const auto finished = [&] { return pending->remaining == 0; };
  if (!pending->done.wait_for(lock, timeout, finished)) {
    const std::string reason =
        fmt::format("tensor parallelism: {} did not finish on every rank within {} s", what,
                    std::chrono::duration<double>(timeout).count());
    pending->error = reason;  // what the ranks the abort wakes fail with is this again
    lock.unlock();
    group_[0]->abort(reason);
    lock.lock();
    // Ranks waiting in a collective leave it now; one stuck elsewhere is left behind.
    pending->done.wait_for(lock, std::min(timeout, kAbortGrace), finished);
    std::string stuck;
    for (int r = 0; r < size(); ++r) {
      if (!pending->finished[r]) stuck += fmt::format("{}{}", stuck.empty() ? "" : ", ", r);
    }
    broken_ = stuck.empty() ? reason : fmt::format("{} (stuck: rank {})", reason, stuck);
    throw Error(broken_);
  }
  if (!pending->error.empty()) {
    broken_ = pending->error;
    throw Error(broken_);
  }
}

void TensorParallelExecutor::throw_if_broken() const {
  if (!broken_.empty()) {
    throw Error(fmt::format("{} (the tensor-parallel group runs no more steps)", broken_));
  }
}

void TensorParallelExecutor::execute(const ScheduledBatch& batch,
                                     std::vector<SampleResult>& samples_out) {
  start(batch);
  finish(samples_out);
}

void TensorParallelExecutor::start(const ScheduledBatch& batch) {
  throw_if_broken();
  step_.build(batch, limits_.block_size);
  on_every_rank([this](int r) { ranks_[r]->runner->start(step_); }, step_timeout_, "a step");
}

void TensorParallelExecutor::finish(std::vector<SampleResult>& samples_out) {
  throw_if_broken();
  on_every_rank([this](int r) { ranks_[r]->runner->finish(rank_samples_[r]); }, step_timeout_,
                "a step");
  samples_out = std::move(rank_samples_[0]);
  device_wait_seconds_ = ranks_[0]->runner->last_step_device_wait_seconds();
}

DeviceMemoryInfo TensorParallelExecutor::memory_info() const {
  return ranks_[0]->backend->memory_info();
}

}  // namespace nanovllm
