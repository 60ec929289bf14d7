// An owning byte buffer on one device; tensors view into it.
#pragma once

#include <cstddef>
#include <initializer_list>

#include "core/tensor.h"

namespace nanovllm {

// Device memory comes from an allocator the backend registers, so core stays free of CUDA.
struct DeviceAllocator {
  void* (*allocate)(size_t bytes) = nullptr;
  void (*release)(void* pointer) = nullptr;
};
void register_device_allocator(Device device, DeviceAllocator allocator);

class Buffer {
 public:
  Buffer() = default;
  Buffer(size_t bytes, Device device = Device::kCPU);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  // A contiguous tensor over the start of the buffer.
  Tensor as_tensor(DType dtype, std::initializer_list<int64_t> shape) const;

 private:
  void reset();

  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_ = Device::kCPU;
};

// A tensor together with the buffer that owns its storage.
struct OwnedTensor {
  Buffer buffer;
  Tensor tensor;

  OwnedTensor() = default;
  OwnedTensor(DType dtype, std::initializer_list<int64_t> shape, Device device = Device::kCPU);
};

}  // namespace nanovllm
