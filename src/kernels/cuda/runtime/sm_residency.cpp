#include "kernels/cuda/runtime/sm_residency.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm::cuda {

size_t half_sm_shared_memory(size_t needed) {
  int device = 0, per_sm = 0, per_block_reserve = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&device));
  NVLLM_CUDA_CHECK(
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  NVLLM_CUDA_CHECK(
      cudaDeviceGetAttribute(&per_block_reserve, cudaDevAttrReservedSharedMemoryPerBlock, device));
  const int half = per_sm / 2 - per_block_reserve;
  return std::max(needed, static_cast<size_t>(std::max(half, 0)));
}

}  // namespace nanovllm::cuda
