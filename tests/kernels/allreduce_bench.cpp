// What a decode step's all-reduces cost over the GPUs of this machine: one rank a GPU and a
// thread, each all-reducing its [rows, hidden] bf16 activations through the CUDA backend 100
// times in a captured graph, as a decode step replays them, once through NCCL alone and once
// through the one-shot all-reduce over peer memory. Prints the time of one all-reduce and of a
// step's (2 a layer, by the path the engine takes at that size) for the Qwen3-8B and -32B shapes.
//   usage: allreduce_bench [RANKS]   (default: every visible GPU, at least 2)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/buffer.h"
#include "kernels/backend.h"
#include "kernels/cuda/runtime/nccl_group.h"

namespace nanovllm {
namespace {

constexpr int kCallsPerGraph = 100;
constexpr int kReplays = 20;

// Microseconds per all-reduce of `rows` x `hidden` bf16, over every rank at once.
double time_all_reduce(const std::vector<std::shared_ptr<Communicator>>& group, int rows,
                       int hidden) {
  std::vector<double> per_call(group.size());
  std::vector<std::thread> ranks;
  for (size_t r = 0; r < group.size(); ++r) {
    ranks.emplace_back([&, r] {
      auto backend = make_cuda_backend(DType::kBF16, static_cast<int>(r), group[r]);
      OwnedTensor x(DType::kBF16, {rows, hidden}, Device::kCUDA);
      backend->all_reduce_sum(x.tensor);  // NCCL's first call sets up its channels
      backend->synchronize();
      auto graph = backend->capture([&] {
        for (int i = 0; i < kCallsPerGraph; ++i) backend->all_reduce_sum(x.tensor);
      });
      graph->replay();
      backend->synchronize();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kReplays; ++i) graph->replay();
      backend->synchronize();
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      per_call[r] = seconds * 1e6 / (kReplays * kCallsPerGraph);
    });
  }
  for (std::thread& rank : ranks) rank.join();
  double slowest = 0;
  for (double us : per_call) slowest = std::max(slowest, us);
  return slowest;
}

int run(int ranks) {
  const auto nccl = cuda::make_nccl_group(ranks, 0);
  constexpr size_t kOneShotTried = size_t{4} << 20;
  const auto one_shot = cuda::make_nccl_group(ranks, kOneShotTried);
  const size_t engine_max = cuda::default_one_shot_max_bytes(ranks);
  std::printf(
      "all-reduce over %d GPUs (bf16, in graphs of %d); the engine takes the one-shot "
      "path up to %zu KiB\n",
      ranks, kCallsPerGraph, engine_max >> 10);
  std::printf("%-12s %6s %6s %10s %10s %14s\n", "shape", "hidden", "rows", "NCCL us", "1-shot us",
              "us / step (2L)");
  struct Shape {
    const char* name;
    int hidden;
    int layers;
  };
  for (const Shape& shape : {Shape{"Qwen3-8B", 4096, 36}, Shape{"Qwen3-32B", 5120, 64}}) {
    for (int rows : {1, 8, 64, 131, 256}) {
      const double nccl_us = time_all_reduce(nccl, rows, shape.hidden);
      const double one_shot_us = time_all_reduce(one_shot, rows, shape.hidden);
      const bool engine_one_shot = size_t{2} * rows * shape.hidden <= engine_max;
      const double engine_us = engine_one_shot ? one_shot_us : nccl_us;
      std::printf("%-12s %6d %6d %10.2f %10.2f %14.1f\n", shape.name, shape.hidden, rows, nccl_us,
                  one_shot_us, engine_us * 2 * shape.layers);
    }
  }
  return 0;
}

}  // namespace
}  // namespace nanovllm

int main(int argc, char** argv) {
  try {
    int ranks = argc > 1 ? std::atoi(argv[1]) : 0;
    if (ranks == 0) {
      // Every visible GPU: make_gpu_group says how many there are when asked for too many.
      for (ranks = 8; ranks > 2; --ranks) {
        try {
          nanovllm::make_gpu_group(ranks);
          break;
        } catch (const nanovllm::Error&) {
        }
      }
    }
    return nanovllm::run(ranks);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "allreduce_bench: %s\n", error.what());
    return 1;
  }
}
