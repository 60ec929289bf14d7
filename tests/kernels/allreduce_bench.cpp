// What a decode step's all-reduces cost over the GPUs of this machine: one rank a GPU and a
// thread, each all-reducing its [rows, hidden] bf16 activations through the CUDA backend (NCCL
// on its stream) 100 times in a captured graph, as a decode step replays them. Prints the time
// of one all-reduce and of a step's (2 a layer) for the Qwen3-8B and -32B shapes.
//   usage: allreduce_bench [RANKS]   (default: every visible GPU, at least 2)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/buffer.h"
#include "kernels/backend.h"

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
  const auto group = make_gpu_group(ranks);
  std::printf("all-reduce over %d GPUs (NCCL, bf16, in graphs of %d)\n", ranks, kCallsPerGraph);
  std::printf("%-12s %6s %6s %10s %14s\n", "shape", "hidden", "rows", "us / call",
              "us / step (2L)");
  struct Shape {
    const char* name;
    int hidden;
    int layers;
  };
  for (const Shape& shape : {Shape{"Qwen3-8B", 4096, 36}, Shape{"Qwen3-32B", 5120, 64}}) {
    for (int rows : {1, 8, 64, 131, 256}) {
      const double us = time_all_reduce(group, rows, shape.hidden);
      std::printf("%-12s %6d %6d %10.2f %14.1f\n", shape.name, shape.hidden, rows, us,
                  us * 2 * shape.layers);
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
