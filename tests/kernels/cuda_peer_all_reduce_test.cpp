// The one-shot all-reduce over peer memory against the sum on the host, in rank order in f32
// as the kernel sums: exact, on every rank, for every dtype and for sizes that take one block,
// several, and more vectors than the grid has threads; many calls in a row (the inboxes'
// double-buffering), inside a replayed graph, and through the NCCL group's choice of path.
// Needs 2 GPUs that map each other's memory; skipped otherwise.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"
#include "kernels/backend.h"
#include "kernels/cuda/runtime/nccl_group.h"
#include "kernels/cuda/runtime/peer_all_reduce.h"

namespace nanovllm::cuda {
namespace {

int visible_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

#define REQUIRE_TWO_PEER_GPUS(group)                                         \
  do {                                                                       \
    if (visible_devices() < 2) GTEST_SKIP() << "needs 2 GPUs";               \
    if (!(group)) GTEST_SKIP() << "the GPUs cannot map each other's memory"; \
  } while (0)

// Host values of one rank's tensor, as the bits the device holds.
struct HostTensor {
  DType dtype;
  std::vector<uint16_t> half;  // bf16 / f16
  std::vector<float> f32;

  HostTensor(DType type, size_t n) : dtype(type) {
    if (type == DType::kF32) {
      f32.resize(n);
    } else {
      half.resize(n);
    }
  }
  size_t size() const { return dtype == DType::kF32 ? f32.size() : half.size(); }
  void* data() { return dtype == DType::kF32 ? static_cast<void*>(f32.data()) : half.data(); }
  size_t bytes() const { return size() * dtype_size(dtype); }
  float get(size_t i) const {
    if (dtype == DType::kF32) return f32[i];
    return dtype == DType::kBF16 ? bf16_to_float(half[i]) : fp16_to_float(half[i]);
  }
  void set(size_t i, float value) {
    if (dtype == DType::kF32) {
      f32[i] = value;
    } else {
      half[i] = dtype == DType::kBF16 ? float_to_bf16(value) : float_to_fp16(value);
    }
  }
};

HostTensor random_tensor(DType dtype, size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  HostTensor t(dtype, n);
  for (size_t i = 0; i < n; ++i) t.set(i, dist(rng));
  return t;
}

// What every rank must hold after the all-reduce: the f32 sum in rank order, rounded.
HostTensor rank_order_sum(const std::vector<HostTensor>& ranks) {
  HostTensor sum(ranks[0].dtype, ranks[0].size());
  for (size_t i = 0; i < sum.size(); ++i) {
    float total = 0.0f;
    for (const HostTensor& rank : ranks) total += rank.get(i);
    sum.set(i, total);
  }
  return sum;
}

void expect_same_bits(const HostTensor& actual, const HostTensor& expected, std::string_view what) {
  ASSERT_EQ(actual.bytes(), expected.bytes());
  const auto* a = static_cast<const unsigned char*>(const_cast<HostTensor&>(actual).data());
  const auto* e = static_cast<const unsigned char*>(const_cast<HostTensor&>(expected).data());
  if (std::memcmp(a, e, actual.bytes()) == 0) return;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual.get(i) != expected.get(i)) {
      FAIL() << what << ": element " << i << " of " << actual.size() << " is " << actual.get(i)
             << ", the rank-order sum " << expected.get(i);
    }
  }
}

// One thread a rank, each with its device current and its own stream.
void on_every_rank(int ranks, const std::function<void(int rank, cudaStream_t stream)>& job) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      cudaStream_t stream = nullptr;
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
      job(r, stream);
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

// `calls` all-reduces in a row, each of its own random tensors of `elements`, checked on every
// rank; with `graph`, captured once and replayed `replays` times (each replay sums the sums).
void check_calls(PeerAllReduce& group, DType dtype, int64_t elements, int calls, bool graph,
                 int replays, uint32_t seed) {
  const int ranks = group.size();
  std::mt19937 rng(seed);
  // inputs[call][rank]
  std::vector<std::vector<HostTensor>> inputs(calls);
  for (auto& call : inputs) {
    for (int r = 0; r < ranks; ++r) call.push_back(random_tensor(dtype, elements, rng));
  }
  std::vector<HostTensor> expected;
  for (const auto& call : inputs) {
    HostTensor sum = rank_order_sum(call);
    for (int replay = 1; replay < replays; ++replay) {
      sum = rank_order_sum(std::vector<HostTensor>(ranks, sum));
    }
    expected.push_back(std::move(sum));
  }
  std::vector<std::vector<HostTensor>> outputs(calls);
  for (auto& call : outputs) call.assign(ranks, HostTensor(dtype, elements));

  on_every_rank(ranks, [&](int rank, cudaStream_t stream) {
    const size_t bytes = static_cast<size_t>(elements) * dtype_size(dtype);
    std::vector<void*> device(calls);
    for (int c = 0; c < calls; ++c) {
      ASSERT_EQ(cudaMalloc(&device[c], bytes), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(device[c], inputs[c][rank].data(), bytes, cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    const auto run_all = [&] {
      for (int c = 0; c < calls; ++c) {
        group.run(rank, Tensor(device[c], dtype, {elements}, Device::kCUDA), stream);
      }
    };
    if (graph) {
      cudaGraph_t captured = nullptr;
      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      run_all();
      ASSERT_EQ(cudaStreamEndCapture(stream, &captured), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&exec, captured, 0), cudaSuccess);
      for (int replay = 0; replay < replays; ++replay) {
        ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      }
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(captured);
    } else {
      run_all();
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    for (int c = 0; c < calls; ++c) {
      ASSERT_EQ(cudaMemcpy(outputs[c][rank].data(), device[c], bytes, cudaMemcpyDeviceToHost),
                cudaSuccess);
      cudaFree(device[c]);
    }
  });
  for (int c = 0; c < calls; ++c) {
    for (int r = 0; r < ranks; ++r) {
      SCOPED_TRACE(testing::Message() << "call " << c << ", rank " << r << " of " << ranks);
      expect_same_bits(outputs[c][r], expected[c], dtype_name(dtype));
    }
  }
}

TEST(PeerAllReduce, SumsInRankOrderOnEveryRankForEveryDtypeAndSize) {
  if (visible_devices() < 2) GTEST_SKIP() << "needs 2 GPUs";
  for (int ranks = 2; ranks <= std::min(visible_devices(), PeerAllReduce::kMaxRanks); ++ranks) {
    const auto group = PeerAllReduce::make(ranks, size_t{1} << 20);
    REQUIRE_TWO_PEER_GPUS(group);
    uint32_t seed = 1;
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      const int64_t vector = 16 / static_cast<int64_t>(dtype_size(dtype));
      // One vector; one block's worth and one over; a decode row; past the grid's threads
      // (64 blocks x 512); the whole inbox.
      for (int64_t vectors : {int64_t{1}, int64_t{3}, int64_t{512}, int64_t{513}, int64_t{1024},
                              int64_t{40000}, int64_t{65536}}) {
        SCOPED_TRACE(testing::Message() << dtype_name(dtype) << ", " << vectors << " vectors");
        check_calls(*group, dtype, vectors * vector, 2, false, 1, seed++);
      }
    }
  }
}

TEST(PeerAllReduce, ManyCallsInARowAndInAReplayedGraph) {
  const int ranks = std::min(visible_devices(), PeerAllReduce::kMaxRanks);
  const auto group = ranks >= 2 ? PeerAllReduce::make(ranks, size_t{64} << 10) : nullptr;
  REQUIRE_TWO_PEER_GPUS(group);
  // 8 KiB (one block) and 40 KiB (five): a rank ahead by a call writes the other half of the
  // inboxes, never the one a slower rank still reads.
  check_calls(*group, DType::kBF16, 4096, 200, false, 1, 7);
  check_calls(*group, DType::kBF16, 20480, 50, false, 1, 8);
  check_calls(*group, DType::kF32, 2048, 40, true, 5, 9);
}

TEST(PeerAllReduce, AbortReleasesARankWhosePeerNeverCame) {
  const auto group = visible_devices() >= 2 ? PeerAllReduce::make(2, 4096) : nullptr;
  REQUIRE_TWO_PEER_GPUS(group);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* x = nullptr;
  ASSERT_EQ(cudaMalloc(&x, 4096), cudaSuccess);
  group->run(0, Tensor(x, DType::kF32, {1024}, Device::kCUDA), stream);  // rank 1 never calls
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady);
  group->abort();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);  // returns only once the kernel left
  cudaFree(x);
  cudaStreamDestroy(stream);
}

TEST(PeerAllReduce, TakesOnlyWhatItServes) {
  const auto group = visible_devices() >= 2 ? PeerAllReduce::make(2, 4096) : nullptr;
  REQUIRE_TWO_PEER_GPUS(group);
  alignas(16) static float host[2048];
  EXPECT_TRUE(group->takes(Tensor(host, DType::kF32, {1024}, Device::kCUDA)));
  EXPECT_FALSE(group->takes(Tensor(host, DType::kF32, {1025}, Device::kCUDA)));   // > inbox
  EXPECT_FALSE(group->takes(Tensor(host, DType::kF32, {3}, Device::kCUDA)));      // 12 bytes
  EXPECT_FALSE(group->takes(Tensor(host + 1, DType::kF32, {4}, Device::kCUDA)));  // unaligned
  EXPECT_FALSE(group->takes(Tensor(host, DType::kI32, {4}, Device::kCUDA)));
}

// Through the communicator: small messages go the one-shot way, large ones through NCCL; both
// sum exactly over 2 ranks (a + b has one rounding either way).
TEST(PeerAllReduce, TheNcclGroupPicksThePathBySize) {
  if (visible_devices() < 2) GTEST_SKIP() << "needs 2 GPUs";
  const auto group = make_nccl_group(2, size_t{64} << 10);
  for (int64_t elements : {int64_t{4096}, int64_t{131072}}) {  // 8 KiB and 256 KiB of bf16
    std::mt19937 rng(static_cast<uint32_t>(elements));
    const std::vector<HostTensor> inputs = {random_tensor(DType::kBF16, elements, rng),
                                            random_tensor(DType::kBF16, elements, rng)};
    const HostTensor expected = rank_order_sum(inputs);
    std::vector<HostTensor> outputs(2, HostTensor(DType::kBF16, elements));
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        auto backend = make_cuda_backend(DType::kBF16, r, group[r]);
        OwnedTensor x(DType::kBF16, {1, elements}, Device::kCUDA);
        backend->upload(x.tensor, inputs[r].half.data());
        backend->all_reduce_sum(x.tensor);
        backend->download(outputs[r].data(), x.tensor);
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int r = 0; r < 2; ++r) expect_same_bits(outputs[r], expected, "bf16 through the group");
  }
}

}  // namespace
}  // namespace nanovllm::cuda
