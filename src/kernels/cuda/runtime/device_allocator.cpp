#include "kernels/cuda/runtime/device_allocator.h"

#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "core/buffer.h"
#include "core/logging.h"
#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm::cuda {
namespace {

std::atomic<size_t> g_allocated{0};
std::atomic<size_t> g_peak{0};

// cudaFree gets only the pointer, so the sizes of live allocations are kept here.
std::mutex& sizes_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::unordered_map<void*, size_t>& live_sizes() {
  static auto* sizes = new std::unordered_map<void*, size_t>();  // outlives static destructors
  return *sizes;
}

void raise_peak(size_t allocated) {
  size_t peak = g_peak.load();
  while (allocated > peak && !g_peak.compare_exchange_weak(peak, allocated)) {
  }
}

void* allocate(size_t bytes) {
  void* pointer = nullptr;
  const cudaError_t status = cudaMalloc(&pointer, bytes);
  if (status != cudaSuccess) {
    // Clear the error so a later cudaGetLastError() after a kernel launch does not report it.
    (void)cudaGetLastError();
    size_t free = 0;
    size_t total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) (void)cudaGetLastError();
    throw Error(fmt::format(
        "CUDA out of memory: cudaMalloc of {} bytes ({:.1f} MiB) failed with {} ({}); {} bytes "
        "({:.1f} MiB) free of {} on the device, {} held by this process's buffers",
        bytes, bytes / 1048576.0, cudaGetErrorName(status), cudaGetErrorString(status), free,
        free / 1048576.0, total, g_allocated.load()));
  }
  {
    std::lock_guard<std::mutex> lock(sizes_mutex());
    live_sizes()[pointer] = bytes;
  }
  raise_peak(g_allocated.fetch_add(bytes) + bytes);
  return pointer;
}

// Called from Buffer's destructor: it must not throw, so a failure is logged.
void release(void* pointer) {
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(sizes_mutex());
    auto it = live_sizes().find(pointer);
    if (it != live_sizes().end()) {
      bytes = it->second;
      live_sizes().erase(it);
    }
  }
  g_allocated.fetch_sub(bytes);
  const cudaError_t status = cudaFree(pointer);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    // At process exit the runtime may be torn down before the last buffers are freed.
    if (status != cudaErrorCudartUnloading) {
      NVLLM_LOG_ERROR("cudaFree of {} bytes failed: {} ({})", bytes, cudaGetErrorName(status),
                      cudaGetErrorString(status));
    }
  }
}

}  // namespace

void register_cuda_allocator() {
  register_device_allocator(Device::kCUDA, DeviceAllocator{&allocate, &release});
}

AllocatorCounters allocator_counters() {
  return {g_allocated.load(), g_peak.load()};
}

void reset_allocator_peak() {
  g_peak.store(g_allocated.load());
}

}  // namespace nanovllm::cuda
