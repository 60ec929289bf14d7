// Device memory for Buffer(..., Device::kCUDA): cudaMalloc / cudaFree with counters of the bytes
// held now and the most held at once, shared by every CUDA backend of the process.
#pragma once

#include <cstddef>

namespace nanovllm::cuda {

// Makes cudaMalloc / cudaFree the allocator of CUDA buffers; calling it again is harmless.
void register_cuda_allocator();

struct AllocatorCounters {
  size_t allocated = 0;       // bytes held by live CUDA buffers
  size_t peak_allocated = 0;  // most held at once since the last reset_allocator_peak()
};

AllocatorCounters allocator_counters();

// Starts a new peak from what is held now.
void reset_allocator_peak();

}  // namespace nanovllm::cuda
