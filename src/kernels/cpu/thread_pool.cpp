#include "kernels/cpu/thread_pool.h"

#include <algorithm>

#include "core/check.h"

namespace nanovllm::cpu {
namespace {

// About 50-100 microseconds of polling before sleeping: long enough to catch the next op of a
// forward pass, short enough not to steal a shared core for long.
constexpr int kSpinIterations = 1 << 11;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Waits until `value` differs from `old`, spinning first, then sleeping.
template <typename T>
T wait_for_change(const std::atomic<T>& value, T old) {
  for (int i = 0; i < kSpinIterations; ++i) {
    const T now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    cpu_relax();
  }
  T now;
  while ((now = value.load(std::memory_order_acquire)) == old) value.wait(old);
  return now;
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  NVLLM_CHECK_GE(num_threads, 0);
  if (num_threads == 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    const int64_t begin = next_.fetch_add(grain_, std::memory_order_relaxed);
    if (begin >= count_) return;
    (*body_)(begin, std::min(count_, begin + grain_));
  }
}

void ThreadPool::worker_loop() {
  // Start from the generation before any job: a worker that starts late must still see the
  // jobs posted before it ran, so it may not read its baseline from generation_.
  uint64_t seen = 0;
  for (;;) {
    seen = wait_for_change(generation_, seen);
    if (stopping_.load(std::memory_order_relaxed)) return;
    run_chunks();
    if (busy_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) busy_workers_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t count, int64_t cost_per_item, const Body& body,
                              int64_t grain) {
  if (count <= 0) return;
  if (grain <= 0) grain = (count + 8 * size() - 1) / (8 * size());
  if (workers_.empty() || count <= grain || count * cost_per_item < kMinParallelWork) {
    body(0, count);
    return;
  }
  body_ = &body;
  count_ = count;
  grain_ = grain;
  next_.store(0, std::memory_order_relaxed);
  busy_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes the job to the workers
  generation_.notify_all();
  run_chunks();
  int busy;
  while ((busy = busy_workers_.load(std::memory_order_acquire)) != 0) {
    wait_for_change(busy_workers_, busy);
  }
  body_ = nullptr;
}

}  // namespace nanovllm::cpu
