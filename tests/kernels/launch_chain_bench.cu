// What a kernel boundary costs in a chain of kernels launched with the early start of
// launch.cuh (programmatic dependent launch), replayed as a CUDA graph as the engine replays
// decode. Every kernel only records %globaltimer: at its start, when its wait for the kernel
// before returns, and at its end (thread 0 of each CTA). Printed per kernel, relative to the
// first start: the range over its CTAs of each stamp, and the replay time per kernel.
// - A 20 us spinner followed by empty kernels: how far ahead of completions the starts run.
// - 40 empty kernels of 1 to 512 CTAs, with and without clusters: the boundary's floor.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm {
namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// stamps [gridDim.x][3]: start, wait returned, end.
__global__ void stamp_kernel(uint64_t* stamps, uint64_t spin_ns, bool touch_smem) {
  extern __shared__ char smem[];
  const uint64_t start = global_ns();
  asm volatile("griddepcontrol.launch_dependents;");
  if (touch_smem) smem[threadIdx.x] = 1;  // the shared memory is really held
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const uint64_t released = global_ns();
  while (global_ns() - released < spin_ns) {
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    stamps[blockIdx.x * 3 + 0] = start;
    stamps[blockIdx.x * 3 + 1] = released;
    stamps[blockIdx.x * 3 + 2] = global_ns();
  }
}

struct Stage {
  int grid;
  int threads;
  int smem_bytes;
  uint64_t spin_ns;
  int cluster;  // CTAs per cluster; 0: no cluster
};

void launch(const Stage& stage, uint64_t* stamps, cudaStream_t stream) {
  cudaLaunchAttribute attributes[2] = {};
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = 1;
  attributes[1].id = cudaLaunchAttributeClusterDimension;
  attributes[1].val.clusterDim.x = std::max(stage.cluster, 1);
  attributes[1].val.clusterDim.y = 1;
  attributes[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = stage.grid;
  config.blockDim = stage.threads;
  config.dynamicSmemBytes = stage.smem_bytes;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = stage.cluster > 0 ? 2 : 1;
  NVLLM_CUDA_CHECK(
      cudaLaunchKernelEx(&config, stamp_kernel, stamps, stage.spin_ns, stage.smem_bytes > 0));
}

void run(const std::string& name, const std::vector<Stage>& stages, cudaStream_t stream) {
  std::vector<uint64_t*> stamps(stages.size());
  for (size_t i = 0; i < stages.size(); ++i) {
    NVLLM_CUDA_CHECK(cudaMalloc(&stamps[i], stages[i].grid * 3 * sizeof(uint64_t)));
  }
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  NVLLM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (size_t i = 0; i < stages.size(); ++i) launch(stages[i], stamps[i], stream);
  NVLLM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  NVLLM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int warmup = 0; warmup < 3; ++warmup) NVLLM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  NVLLM_CUDA_CHECK(cudaStreamSynchronize(stream));

  std::vector<std::vector<uint64_t>> host(stages.size());
  uint64_t base = UINT64_MAX;
  for (size_t i = 0; i < stages.size(); ++i) {
    host[i].resize(stages[i].grid * 3);
    NVLLM_CUDA_CHECK(cudaMemcpy(host[i].data(), stamps[i], host[i].size() * sizeof(uint64_t),
                                cudaMemcpyDeviceToHost));
    for (int b = 0; b < stages[i].grid; ++b) base = std::min(base, host[i][b * 3]);
  }
  fmt::print("== {}\n", name);
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages.size() > 8 && i > 3 && i + 2 < stages.size()) continue;  // a long chain's ends
    uint64_t low[3] = {UINT64_MAX, UINT64_MAX, UINT64_MAX}, high[3] = {0, 0, 0};
    for (int b = 0; b < stages[i].grid; ++b) {
      for (int s = 0; s < 3; ++s) {
        low[s] = std::min(low[s], host[i][b * 3 + s]);
        high[s] = std::max(high[s], host[i][b * 3 + s]);
      }
    }
    const auto us = [&](uint64_t t) { return (t - base) / 1e3; };
    fmt::print(
        "  k{} grid {:4} threads {:4} smem {:6} spin {:6} cluster {}: start {:7.2f}..{:7.2f}  "
        "released {:7.2f}..{:7.2f}  end {:7.2f}..{:7.2f} us\n",
        i, stages[i].grid, stages[i].threads, stages[i].smem_bytes, stages[i].spin_ns,
        stages[i].cluster, us(low[0]), us(high[0]), us(low[1]), us(high[1]), us(low[2]),
        us(high[2]));
  }
  constexpr int kReplays = 50;
  cudaEvent_t begin, end;
  NVLLM_CUDA_CHECK(cudaEventCreate(&begin));
  NVLLM_CUDA_CHECK(cudaEventCreate(&end));
  NVLLM_CUDA_CHECK(cudaEventRecord(begin, stream));
  for (int r = 0; r < kReplays; ++r) NVLLM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  NVLLM_CUDA_CHECK(cudaEventRecord(end, stream));
  NVLLM_CUDA_CHECK(cudaEventSynchronize(end));
  float ms = 0.0f;
  NVLLM_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
  fmt::print("  replay: {:.2f} us per graph, {:.3f} us per kernel\n", ms * 1e3 / kReplays,
             ms * 1e3 / kReplays / stages.size());
  NVLLM_CUDA_CHECK(cudaEventDestroy(begin));
  NVLLM_CUDA_CHECK(cudaEventDestroy(end));
  NVLLM_CUDA_CHECK(cudaGraphExecDestroy(exec));
  NVLLM_CUDA_CHECK(cudaGraphDestroy(graph));
  for (uint64_t* p : stamps) NVLLM_CUDA_CHECK(cudaFree(p));
}

int main_impl() {
  cudaDeviceProp prop{};
  NVLLM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  fmt::print("device: {} ({} SMs)\n", prop.name, sms);
  NVLLM_CUDA_CHECK(
      cudaFuncSetAttribute(stamp_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  cudaStream_t stream;
  NVLLM_CUDA_CHECK(cudaStreamCreate(&stream));

  for (int smem : {0, 40 << 10}) {
    std::vector<Stage> cascade(5, Stage{sms, 128, smem, 0, 0});
    cascade[0].spin_ns = 20000;
    run(fmt::format("a 20 us kernel, then 4 empty ones, {} KB of shared memory each", smem >> 10),
        cascade, stream);
  }
  for (int grid : {1, 64, sms, 512}) {
    run(fmt::format("40 empty kernels of {} CTAs", grid),
        std::vector<Stage>(40, Stage{grid, 128, 16 << 10, 0, 0}), stream);
  }
  for (int cluster : {2, 4, 8}) {
    run(fmt::format("40 empty kernels of 64 CTAs in clusters of {}", cluster),
        std::vector<Stage>(40, Stage{64, 128, 16 << 10, 0, cluster}), stream);
  }
  NVLLM_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace
}  // namespace nanovllm

int main() {
  try {
    return nanovllm::main_impl();
  } catch (const std::exception& e) {
    fmt::print(stderr, "launch_chain_bench: {}\n", e.what());
    return 1;
  }
}
