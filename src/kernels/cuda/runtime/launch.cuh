// Kernel launches that let the next kernel in the stream start early (programmatic dependent
// launch, Hopper and later). A decode step at batch 1 is ~250 short kernels; without this each
// one pays its launch and ramp-up after the previous one has drained. With it, a kernel is
// launched as soon as every CTA of the one before has started, runs its prologue (the GEMV
// streams its weights in), and waits in wait_for_prior_kernels() until the one before has
// finished and its writes are visible.
//
// The contract for every kernel launched with launch_kernel():
// - before wait_for_prior_kernels() it writes nothing to global memory and reads only what no
//   kernel of the stream writes (weights, constants);
// - it calls wait_for_prior_kernels() on every path that touches anything else, even when it
//   only writes (the kernel before may still be reading that memory).
// Kernels launched other ways (cuBLASLt) are ordered as usual.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm::cuda {

// kernel<<<grid, block, smem, stream>>>(args...) with the grid's CTAs in thread block
// clusters of `cluster` (Hopper; 1 x 1 x 1: none), which run at once and can read each other's
// shared memory; with the early start described above.
template <typename... Params, typename... Args>
void launch_kernel_in_clusters(dim3 cluster, void (*kernel)(Params...), dim3 grid, dim3 block,
                               size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attributes[2] = {};
  unsigned count = 0;
  attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[count++].val.programmaticStreamSerializationAllowed = 1;
  if (cluster.x * cluster.y * cluster.z > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = cluster.x;
    attributes[count].val.clusterDim.y = cluster.y;
    attributes[count++].val.clusterDim.z = cluster.z;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  NVLLM_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

// The same without clusters: what almost every kernel uses.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Args&&... args) {
  launch_kernel_in_clusters(dim3(1, 1, 1), kernel, grid, block, smem, stream,
                            std::forward<Args>(args)...);
}

#ifdef __CUDACC__
}  // namespace nanovllm::cuda

#include "kernels/cuda/runtime/timeline.cuh"

namespace nanovllm::cuda {

// Blocks until the kernel before this one in the stream has finished and its writes are
// visible (at once when it was launched without the early start).
__device__ __forceinline__ void wait_for_prior_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  NVLLM_TIMELINE_WAITED();
}

// Lets the next kernel launch once every CTA of this one has called this (or exited). Called
// first thing: the next kernel's wait still orders it after this one's end.
__device__ __forceinline__ void allow_next_kernel_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Both, for kernels whose every input comes from earlier kernels.
__device__ __forceinline__ void start_after_prior_kernels() {
  allow_next_kernel_launch();
  wait_for_prior_kernels();
}
#endif

}  // namespace nanovllm::cuda
