#include "dist/in_process_group.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"

namespace nanovllm {
namespace {

using std::chrono::milliseconds;

// Runs `body(rank)` on one thread per rank and joins them.
template <typename Body>
void on_every_rank(int size, Body body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) threads.emplace_back([&body, rank] { body(rank); });
  for (std::thread& thread : threads) thread.join();
}

std::vector<float> random_values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

TEST(InProcessGroup, AllReduceSumsInRankOrderAndEveryRankGetsTheSameBits) {
  for (int size : {1, 2, 3, 4, 8}) {
    const int64_t rows = 5, cols = 37;
    auto group = make_in_process_group(size);
    std::vector<std::vector<float>> inputs, outputs(size);
    for (int rank = 0; rank < size; ++rank) inputs.push_back(random_values(rows * cols, rank + 1));
    // Three collectives in a row, each on its own values: no rank may run ahead into the next.
    on_every_rank(size, [&](int rank) {
      for (int round = 0; round < 3; ++round) {
        outputs[rank] = inputs[rank];
        for (float& v : outputs[rank]) v += static_cast<float>(round);
        Tensor x(outputs[rank].data(), DType::kF32, {rows, cols}, Device::kCPU);
        group[rank]->all_reduce_sum(x, nullptr);
      }
    });
    for (int64_t i = 0; i < rows * cols; ++i) {
      float expected = inputs[0][i] + 2.0f;
      for (int rank = 1; rank < size; ++rank) expected += inputs[rank][i] + 2.0f;
      for (int rank = 0; rank < size; ++rank) {
        ASSERT_EQ(outputs[rank][i], expected) << "size " << size << " rank " << rank;
      }
    }
  }
}

TEST(InProcessGroup, AllGatherPutsEachRanksColumnsInRankOrder) {
  const int size = 4;
  const int64_t rows = 3, cols = 5;
  auto group = make_in_process_group(size);
  std::vector<std::vector<float>> gathered(size, std::vector<float>(rows * cols * size));
  on_every_rank(size, [&](int rank) {
    std::vector<float> mine(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i) mine[i] = static_cast<float>(100 * rank + i);
    group[rank]->all_gather_columns(
        Tensor(mine.data(), DType::kF32, {rows, cols}, Device::kCPU),
        Tensor(gathered[rank].data(), DType::kF32, {rows, cols * size}, Device::kCPU), nullptr);
  });
  for (int rank = 0; rank < size; ++rank) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int k = 0; k < size; ++k) {
        for (int64_t c = 0; c < cols; ++c) {
          EXPECT_EQ(gathered[rank][r * cols * size + k * cols + c],
                    static_cast<float>(100 * k + r * cols + c));
        }
      }
    }
  }
}

TEST(InProcessGroup, ARankThatNeverArrivesTimesTheOthersOutAndAbortsTheGroup) {
  auto group = make_in_process_group(3, milliseconds(200));
  std::vector<std::string> errors(3);
  on_every_rank(2, [&](int rank) {  // rank 2 never calls
    std::vector<float> values(4, 1.0f);
    try {
      group[rank]->all_reduce_sum(Tensor(values.data(), DType::kF32, {1, 4}, Device::kCPU),
                                  nullptr);
    } catch (const Error& error) {
      errors[rank] = error.what();
    }
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(errors[rank].find("did not reach all_reduce_sum"), std::string::npos) << errors[rank];
  }
  // Aborted for good: the late rank's call fails at once rather than waiting for the others.
  std::vector<float> values(4, 1.0f);
  EXPECT_THROW(
      group[2]->all_reduce_sum(Tensor(values.data(), DType::kF32, {1, 4}, Device::kCPU), nullptr),
      Error);
}

TEST(InProcessGroup, AbortWakesTheRanksWaitingInACollective) {
  auto group = make_in_process_group(3);
  std::vector<std::string> errors(3);
  std::thread failing([&] { group[2]->abort("rank 2 failed: out of memory"); });
  on_every_rank(2, [&](int rank) {
    std::vector<float> values(4, 1.0f);
    try {
      group[rank]->all_reduce_sum(Tensor(values.data(), DType::kF32, {1, 4}, Device::kCPU),
                                  nullptr);
    } catch (const Error& error) {
      errors[rank] = error.what();
    }
  });
  failing.join();
  EXPECT_EQ(errors[0], "rank 2 failed: out of memory");
  EXPECT_EQ(errors[1], "rank 2 failed: out of memory");
}

}  // namespace
}  // namespace nanovllm
