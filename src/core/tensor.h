// A non-owning tensor view: data pointer, dtype, shape, strides (in elements), device.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/check.h"
#include "core/dtype.h"

namespace nanovllm {

enum class Device : uint8_t { kCPU, kCUDA };

std::string_view device_name(Device device);

class Tensor {
 public:
  static constexpr int kMaxDims = 4;

  Tensor() = default;
  // Contiguous view of `shape` starting at `data`.
  Tensor(void* data, DType dtype, std::initializer_list<int64_t> shape,
         Device device = Device::kCPU);
  Tensor(void* data, DType dtype, const int64_t* shape, int ndim, Device device = Device::kCPU);

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int ndim() const { return ndim_; }
  int64_t size(int dim) const;
  int64_t stride(int dim) const;
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return data_ != nullptr; }
  bool is_contiguous() const;

  // Same data, new contiguous shape with the same element count.
  Tensor view(std::initializer_list<int64_t> shape) const;
  // Rows [begin, end) of dimension 0.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Columns [begin, end) of the last dimension (a strided view).
  Tensor slice_last(int64_t begin, int64_t end) const;

  std::string shape_string() const;

 private:
  void set_contiguous_strides();

  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCPU;
  int ndim_ = 0;
  std::array<int64_t, kMaxDims> shape_{};
  std::array<int64_t, kMaxDims> stride_{};
};

}  // namespace nanovllm
