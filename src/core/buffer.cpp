#include "core/buffer.h"

#include <cstdlib>
#include <new>
#include <utility>

namespace nanovllm {
namespace {

DeviceAllocator& allocator_for(Device device) {
  static DeviceAllocator allocators[2];
  return allocators[static_cast<int>(device)];
}

constexpr size_t kHostAlignment = 64;

}  // namespace

void register_device_allocator(Device device, DeviceAllocator allocator) {
  allocator_for(device) = allocator;
}

Buffer::Buffer(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device == Device::kCPU) {
    const size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    data_ = std::aligned_alloc(kHostAlignment, rounded);
    if (data_ == nullptr) throw std::bad_alloc();
  } else {
    const DeviceAllocator& allocator = allocator_for(device);
    NVLLM_CHECK_MSG(allocator.allocate != nullptr, "no allocator registered for {}",
                    device_name(device));
    data_ = allocator.allocate(bytes);
  }
}

Buffer::~Buffer() {
  reset();
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_(other.device_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

void Buffer::reset() {
  if (data_ == nullptr) return;
  if (device_ == Device::kCPU) {
    std::free(data_);
  } else {
    allocator_for(device_).release(data_);
  }
  data_ = nullptr;
  bytes_ = 0;
}

Tensor Buffer::as_tensor(DType dtype, std::initializer_list<int64_t> shape) const {
  Tensor tensor(data_, dtype, shape, device_);
  NVLLM_CHECK_LE(tensor.nbytes(), bytes_);
  return tensor;
}

OwnedTensor::OwnedTensor(DType dtype, std::initializer_list<int64_t> shape, Device device) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  buffer = Buffer(static_cast<size_t>(count) * dtype_size(dtype), device);
  tensor = buffer.as_tensor(dtype, shape);
}

}  // namespace nanovllm
