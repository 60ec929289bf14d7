// A fixed set of worker threads for the CPU ops. Idle workers spin briefly, then sleep on a
// futex (std::atomic::wait): a busy-waiting pool (libgomp's default) slows everything down by
// orders of magnitude once the machine's cores are shared with other work.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace nanovllm::cpu {

class ThreadPool {
 public:
  // num_threads counts the calling thread; 0 means one per hardware thread.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls body(begin, end) on chunks covering [0, count), on the workers and the calling
  // thread, and returns when all are done. cost_per_item (floats touched or multiply-adds)
  // decides whether threads pay off: under kMinParallelWork in total it runs inline. Chunks
  // hold `grain` items, or with grain 0 enough for about 8 chunks per thread. body must not
  // throw (validate first). One caller at a time.
  using Body = std::function<void(int64_t begin, int64_t end)>;
  void parallel_for(int64_t count, int64_t cost_per_item, const Body& body, int64_t grain = 0);

  // Below this much work (floats touched, or multiply-adds) waking the workers costs more than
  // they save.
  static constexpr int64_t kMinParallelWork = int64_t{1} << 16;

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};  // bumped to hand out a job (or to stop)
  std::atomic<int> busy_workers_{0};     // workers still inside the current job
  std::atomic<int64_t> next_{0};         // first item not yet claimed
  std::atomic<bool> stopping_{false};
  const Body* body_ = nullptr;
  int64_t count_ = 0;
  int64_t grain_ = 1;
};

}  // namespace nanovllm::cpu
