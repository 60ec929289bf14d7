#include "kernels/cuda/runtime/device_allocator.h"

#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "core/buffer.h"
#include "core/check.h"
#include "core/logging.h"
#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm::cuda {
namespace {

// Per device ordinal.
constexpr int kMaxDevices = 64;
std::atomic<size_t> g_allocated[kMaxDevices];
std::atomic<size_t> g_peak[kMaxDevices];

struct Allocation {
  size_t bytes = 0;
  int device = 0;
};

// cudaFree gets only the pointer, so the sizes and devices of live allocations are kept here.
std::mutex& sizes_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::unordered_map<void*, Allocation>& live_sizes() {
  static auto* sizes = new std::unordered_map<void*, Allocation>();  // outlives static dtors
  return *sizes;
}

void raise_peak(int device, size_t allocated) {
  size_t peak = g_peak[device].load();
  while (allocated > peak && !g_peak[device].compare_exchange_weak(peak, allocated)) {
  }
}

int current_device() {
  int device = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&device));
  NVLLM_CHECK_LT(device, kMaxDevices);
  return device;
}

void* allocate(size_t bytes) {
  const int device = current_device();
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
        free / 1048576.0, total, g_allocated[device].load()));
  }
  {
    std::lock_guard<std::mutex> lock(sizes_mutex());
    live_sizes()[pointer] = {bytes, device};
  }
  raise_peak(device, g_allocated[device].fetch_add(bytes) + bytes);
  return pointer;
}

// Called from Buffer's destructor: it must not throw, so a failure is logged.
void release(void* pointer) {
  Allocation allocation;
  {
    std::lock_guard<std::mutex> lock(sizes_mutex());
    auto it = live_sizes().find(pointer);
    if (it != live_sizes().end()) {
      allocation = it->second;
      live_sizes().erase(it);
    }
  }
  const size_t bytes = allocation.bytes;
  g_allocated[allocation.device].fetch_sub(bytes);
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

AllocatorCounters allocator_counters(int device) {
  NVLLM_CHECK_LT(device, kMaxDevices);
  return {g_allocated[device].load(), g_peak[device].load()};
}

void reset_allocator_peak(int device) {
  NVLLM_CHECK_LT(device, kMaxDevices);
  g_peak[device].store(g_allocated[device].load());
}

}  // namespace nanovllm::cuda
