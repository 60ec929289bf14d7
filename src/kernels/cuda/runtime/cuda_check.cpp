#include "kernels/cuda/runtime/cuda_check.h"

#include <cublasLt.h>
#include <fmt/format.h>

namespace nanovllm::cuda {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw Error(fmt::format("{}:{}: {} failed: {} ({})", file, line, call, cudaGetErrorName(status),
                          cudaGetErrorString(status)));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(fmt::format("{}:{}: {} failed: {} ({})", file, line, call,
                          cublasLtGetStatusName(status), cublasLtGetStatusString(status)));
}

}  // namespace nanovllm::cuda
