// Device memory for Buffer(..., Device::kCUDA): cudaMalloc / cudaFree on the calling thread's
// current device, with counters per device of the bytes held now and the most held at once.
#pragma once

#include <cstddef>

namespace nanovllm::cuda {

// Makes cudaMalloc / cudaFree the allocator of CUDA buffers; calling it again is harmless.
void register_cuda_allocator();

struct AllocatorCounters {
  size_t allocated = 0;       // bytes held by live CUDA buffers
  size_t peak_allocated = 0;  // most held at once since the last reset_allocator_peak()
};

// Of device `device`.
AllocatorCounters allocator_counters(int device);

// Starts device `device`'s new peak from what it holds now.
void reset_allocator_peak(int device);

}  // namespace nanovllm::cuda
