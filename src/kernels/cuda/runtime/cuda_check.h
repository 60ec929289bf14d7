// Checks for every CUDA runtime and cuBLAS call: a failure throws Error naming the call, the
// file and line, and the library's own message.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime.h>

#include "core/check.h"

namespace nanovllm::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

}  // namespace nanovllm::cuda

#define NVLLM_CUDA_CHECK(call)                                                      \
  do {                                                                              \
    const cudaError_t nvllm_status_ = (call);                                       \
    if (nvllm_status_ != cudaSuccess)                                               \
      ::nanovllm::cuda::throw_cuda_error(nvllm_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define NVLLM_CUBLAS_CHECK(call)                                                      \
  do {                                                                                \
    const cublasStatus_t nvllm_status_ = (call);                                      \
    if (nvllm_status_ != CUBLAS_STATUS_SUCCESS)                                       \
      ::nanovllm::cuda::throw_cublas_error(nvllm_status_, #call, __FILE__, __LINE__); \
  } while (0)
