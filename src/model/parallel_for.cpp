#include "model/parallel_for.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace nanovllm {

void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (count <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const int64_t workers = std::min(hardware, (count + grain - 1) / grain);
  if (workers <= 1) {
    body(0, count);
    return;
  }
  const int64_t per_worker = (count + workers - 1) / workers;
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto run = [&](int64_t begin, int64_t end) {
    try {
      body(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  for (int64_t w = 1; w < workers; ++w) {
    const int64_t begin = w * per_worker;
    const int64_t end = std::min(count, begin + per_worker);
    if (begin < end) threads.emplace_back(run, begin, end);
  }
  run(0, std::min(count, per_worker));
  for (std::thread& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace nanovllm
