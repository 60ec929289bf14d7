// Threads that run the endpoints' work (JSON parsing, tokenizing, chat templates) off the I/O
// threads, with a bounded queue: a call that finds the queue full is refused at once rather than
// waiting behind it. The server keeps two lanes, one for small bodies and one for large ones, so
// that a flood of large, slow calls (a tokenizer fed megabytes) delays only other large calls.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nanovllm {

class WorkerLane {
 public:
  WorkerLane(int threads, size_t max_queued);
  ~WorkerLane();  // stop()
  WorkerLane(const WorkerLane&) = delete;
  WorkerLane& operator=(const WorkerLane&) = delete;

  // Queues `job`; false when `max_queued` jobs are already waiting or the lane has stopped.
  bool try_post(std::function<void()> job);
  // Lets the running jobs finish, drops the queued ones and joins the threads. Idempotent.
  void stop();

 private:
  void run();

  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace nanovllm
