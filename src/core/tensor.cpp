#include "core/tensor.h"

#include <fmt/format.h>

namespace nanovllm {

std::string_view device_name(Device device) {
  return device == Device::kCPU ? "cpu" : "cuda";
}

Tensor::Tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device)
    : Tensor(data, dtype, shape.begin(), static_cast<int>(shape.size()), device) {}

Tensor::Tensor(void* data, DType dtype, const int64_t* shape, int ndim, Device device)
    : data_(data), dtype_(dtype), device_(device), ndim_(ndim) {
  NVLLM_CHECK_LE(ndim, kMaxDims);
  for (int i = 0; i < ndim; ++i) {
    NVLLM_CHECK_GE(shape[i], 0);
    shape_[i] = shape[i];
  }
  set_contiguous_strides();
}

void Tensor::set_contiguous_strides() {
  int64_t stride = 1;
  for (int i = ndim_ - 1; i >= 0; --i) {
    stride_[i] = stride;
    stride *= shape_[i];
  }
}

int64_t Tensor::size(int dim) const {
  if (dim < 0) dim += ndim_;
  NVLLM_CHECK_MSG(dim >= 0 && dim < ndim_, "dim {} of a {}-d tensor", dim, ndim_);
  return shape_[dim];
}

int64_t Tensor::stride(int dim) const {
  if (dim < 0) dim += ndim_;
  NVLLM_CHECK_MSG(dim >= 0 && dim < ndim_, "dim {} of a {}-d tensor", dim, ndim_);
  return stride_[dim];
}

int64_t Tensor::numel() const {
  int64_t count = 1;
  for (int i = 0; i < ndim_; ++i) count *= shape_[i];
  return count;
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int i = ndim_ - 1; i >= 0; --i) {
    if (shape_[i] != 1 && stride_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

Tensor Tensor::view(std::initializer_list<int64_t> shape) const {
  NVLLM_CHECK_MSG(is_contiguous(), "view of a non-contiguous tensor {}", shape_string());
  Tensor result(data_, dtype_, shape, device_);
  NVLLM_CHECK_EQ(result.numel(), numel());
  return result;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  NVLLM_CHECK_GE(ndim_, 1);
  NVLLM_CHECK_MSG(0 <= begin && begin <= end && end <= shape_[0], "rows [{}, {}) of {}", begin, end,
                  shape_string());
  Tensor result = *this;
  result.data_ = static_cast<char*>(data_) + begin * stride_[0] * dtype_size(dtype_);
  result.shape_[0] = end - begin;
  return result;
}

Tensor Tensor::slice_last(int64_t begin, int64_t end) const {
  NVLLM_CHECK_GE(ndim_, 1);
  const int last = ndim_ - 1;
  NVLLM_CHECK_MSG(0 <= begin && begin <= end && end <= shape_[last], "columns [{}, {}) of {}",
                  begin, end, shape_string());
  Tensor result = *this;
  result.data_ = static_cast<char*>(data_) + begin * stride_[last] * dtype_size(dtype_);
  result.shape_[last] = end - begin;
  return result;
}

std::string Tensor::shape_string() const {
  std::string text = fmt::format("{} [", dtype_name(dtype_));
  for (int i = 0; i < ndim_; ++i) text += fmt::format("{}{}", i ? ", " : "", shape_[i]);
  return text + "]";
}

}  // namespace nanovllm
