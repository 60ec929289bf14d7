#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace nanovllm::cpu {
namespace {

constexpr int64_t kCostly = ThreadPool::kMinParallelWork;  // per item: always worth threads

// Every item of [0, count) visited exactly once.
void expect_each_item_once(ThreadPool& pool, int64_t count, int64_t grain) {
  std::vector<std::atomic<int>> visits(count);
  pool.parallel_for(
      count, kCostly,
      [&](int64_t begin, int64_t end) {
        ASSERT_LT(begin, end);
        for (int64_t i = begin; i < end; ++i) visits[i].fetch_add(1);
      },
      grain);
  for (int64_t i = 0; i < count; ++i) ASSERT_EQ(visits[i].load(), 1) << "item " << i;
}

TEST(ThreadPool, FreshPoolsRunTheirFirstJob) {
  // Jobs posted before the workers have even started must not be missed.
  for (int round = 0; round < 200; ++round) {
    ThreadPool pool(1 + round % 4);
    expect_each_item_once(pool, 37, 1);
  }
}

TEST(ThreadPool, ManyJobsInARow) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (int job = 0; job < 3000; ++job) expect_each_item_once(pool, 1 + job % 50, job % 3);
}

TEST(ThreadPool, UsesTheWorkersForLargeWorkAndTheCallerForSmall) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> off_caller{0};
  pool.parallel_for(1, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() != caller) off_caller.fetch_add(1);
  });
  pool.parallel_for(1000, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() != caller) off_caller.fetch_add(1);
  });
  EXPECT_EQ(off_caller.load(), 0);  // both under the work threshold

  std::atomic<int> chunks_off_caller{0};
  for (int attempt = 0; attempt < 100 && chunks_off_caller.load() == 0; ++attempt) {
    pool.parallel_for(
        64, kCostly,
        [&](int64_t, int64_t) {
          std::this_thread::sleep_for(std::chrono::microseconds(50));
          if (std::this_thread::get_id() != caller) chunks_off_caller.fetch_add(1);
        },
        1);
  }
  EXPECT_GT(chunks_off_caller.load(), 0);
}

TEST(ThreadPool, ZeroMeansEveryHardwareThread) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  expect_each_item_once(pool, 100, 0);
}

}  // namespace
}  // namespace nanovllm::cpu
