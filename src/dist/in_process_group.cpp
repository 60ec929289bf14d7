#include "dist/in_process_group.h"

#include <fmt/format.h>

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "core/check.h"

namespace nanovllm {
namespace {

// What the ranks of one group share: a barrier that can be aborted, and each rank's tensor for
// the collective in progress.
class Shared {
 public:
  Shared(int size, std::chrono::milliseconds timeout)
      : size_(size), timeout_(timeout), posted_(size) {}

  // Posts `x` as `rank`'s tensor and waits until every rank has posted its tensor for this
  // collective; returns them in rank order.
  const std::vector<const Tensor*>& exchange(int rank, const Tensor& x, const char* what) {
    posted_[rank] = &x;
    wait(what);
    return posted_;
  }

  // Every rank arrives before any leaves; throws Error when the group is aborted or a rank does
  // not arrive within the timeout (which aborts the group).
  void wait(const char* what) {
    std::unique_lock lock(mutex_);
    if (!aborted_.empty()) throw Error(aborted_);
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    const bool done = changed_.wait_for(
        lock, timeout_, [&] { return generation_ != generation || !aborted_.empty(); });
    if (!aborted_.empty()) throw Error(aborted_);
    if (!done) {
      abort_locked(fmt::format("tensor parallelism: a rank did not reach {} within {} ms", what,
                               timeout_.count()));
      throw Error(aborted_);
    }
  }

  void abort(const std::string& reason) {
    std::lock_guard lock(mutex_);
    abort_locked(reason);
  }

 private:
  void abort_locked(const std::string& reason) {
    if (aborted_.empty()) aborted_ = reason.empty() ? "tensor parallelism: aborted" : reason;
    changed_.notify_all();
  }

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::string aborted_;
  std::vector<const Tensor*> posted_;
};

void check_f32_rows(const Tensor& x, const char* name) {
  NVLLM_CHECK_MSG(
      x.device() == Device::kCPU && x.dtype() == DType::kF32 && x.ndim() == 2 && x.stride(1) == 1,
      "{} must be f32 rows on the CPU, got {} {} on {}", name, dtype_name(x.dtype()),
      x.shape_string(), device_name(x.device()));
}

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Shared> shared, int rank, int size)
      : shared_(std::move(shared)), rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(Tensor x, void* /*stream*/) override {
    check_f32_rows(x, "all_reduce_sum x");
    const std::vector<const Tensor*>& all = shared_->exchange(rank_, x, "all_reduce_sum");
    const int64_t rows = x.size(0);
    const int64_t cols = x.size(1);
    scratch_.resize(static_cast<size_t>(rows * cols));
    for (const Tensor* other : all) {
      NVLLM_CHECK_MSG(other->size(0) == rows && other->size(1) == cols,
                      "all_reduce_sum: rank {} has {} where this rank has {}", rank_,
                      other->shape_string(), x.shape_string());
    }
    // Rank order, whatever the rank computing: every rank gets the same sum.
    for (int64_t r = 0; r < rows; ++r) {
      float* sum = scratch_.data() + r * cols;
      std::memcpy(sum, all[0]->data_as<float>() + r * all[0]->stride(0), cols * sizeof(float));
      for (size_t k = 1; k < all.size(); ++k) {
        const float* part = all[k]->data_as<float>() + r * all[k]->stride(0);
        for (int64_t c = 0; c < cols; ++c) sum[c] += part[c];
      }
    }
    shared_->wait("all_reduce_sum");  // no rank writes before every rank has read
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(x.data_as<float>() + r * x.stride(0), scratch_.data() + r * cols,
                  cols * sizeof(float));
    }
  }

  void all_gather_columns(const Tensor& x, Tensor out, void* /*stream*/) override {
    check_f32_rows(x, "all_gather_columns x");
    check_f32_rows(out, "all_gather_columns out");
    const int64_t rows = x.size(0);
    const int64_t cols = x.size(1);
    NVLLM_CHECK_MSG(out.size(0) == rows && out.size(1) == cols * size_,
                    "all_gather_columns: out {} for {} ranks of x {}", out.shape_string(), size_,
                    x.shape_string());
    const std::vector<const Tensor*>& all = shared_->exchange(rank_, x, "all_gather_columns");
    for (int k = 0; k < size_; ++k) {
      const Tensor& part = *all[k];
      NVLLM_CHECK_MSG(part.size(0) == rows && part.size(1) == cols,
                      "all_gather_columns: rank {} has {} where rank {} has {}", k,
                      part.shape_string(), rank_, x.shape_string());
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(out.data_as<float>() + r * out.stride(0) + k * cols,
                    part.data_as<float>() + r * part.stride(0), cols * sizeof(float));
      }
    }
    shared_->wait("all_gather_columns");  // no rank goes on to overwrite x while one reads it
  }

  void abort(const std::string& reason) override { shared_->abort(reason); }

 private:
  std::shared_ptr<Shared> shared_;
  const int rank_;
  const int size_;
  std::vector<float> scratch_;
};

}  // namespace

std::vector<std::shared_ptr<Communicator>> make_in_process_group(
    int size, std::chrono::milliseconds timeout) {
  NVLLM_CHECK_GE(size, 1);
  auto shared = std::make_shared<Shared>(size, timeout);
  std::vector<std::shared_ptr<Communicator>> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.push_back(std::make_shared<InProcessCommunicator>(shared, rank, size));
  }
  return ranks;
}

}  // namespace nanovllm
