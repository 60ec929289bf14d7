#include "kernels/cuda/runtime/small_copy.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kThreads = 256;

// Copies `count` elements of T; the widest T that both addresses and the size allow.
template <typename T>
__global__ void small_copy_kernel(T* dst, const T* src, size_t count) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  for (size_t i = blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * kThreads) {
    dst[i] = src[i];
  }
}

template <typename T>
void launch_copy(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  const size_t count = bytes / sizeof(T);
  // One element a thread: every read from the host is in flight at once.
  const auto blocks = static_cast<unsigned>(std::max<size_t>(1, (count + kThreads - 1) / kThreads));
  launch_kernel(small_copy_kernel<T>, blocks, kThreads, 0, stream, static_cast<T*>(dst),
                static_cast<const T*>(src), count);
}

}  // namespace

void small_copy(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  NVLLM_CHECK_MSG(bytes <= kSmallCopyMaxBytes, "small_copy of {} bytes (at most {})", bytes,
                  kSmallCopyMaxBytes);
  if (bytes == 0) return;
  const auto all = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | bytes;
  if (all % 16 == 0) return launch_copy<uint4>(dst, src, bytes, stream);
  if (all % 4 == 0) return launch_copy<uint32_t>(dst, src, bytes, stream);
  launch_copy<unsigned char>(dst, src, bytes, stream);
}

}  // namespace nanovllm::cuda
