// A build without the CUDA toolkit: the CUDA backend is refused with a clear error.
#include "core/check.h"
#include "kernels/backend.h"

namespace nanovllm {

bool cuda_available() {
  return false;
}

std::unique_ptr<Backend> make_cuda_backend(DType, int, std::shared_ptr<Communicator>) {
  throw Error(
      "this build has no CUDA backend (configured without a CUDA toolkit); use --device cpu");
}

std::vector<std::shared_ptr<Communicator>> make_gpu_group(int) {
  throw Error(
      "this build has no CUDA backend (configured without a CUDA toolkit); use --device cpu");
}

}  // namespace nanovllm
