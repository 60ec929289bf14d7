// Argument checks of the CUDA backend's ops, run on the host before anything is launched (a
// kernel cannot report a bad argument). Each failure throws Error naming the tensor and
// printing what was expected next to what was given.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "kernels/backend.h"

namespace nanovllm::cuda {

// A CUDA tensor of `dtype` and `shape` (-1: any extent), possibly with strided rows.
inline void check_device_tensor(const Tensor& tensor, std::string_view name, DType dtype,
                                std::initializer_list<int64_t> shape) {
  NVLLM_CHECK_MSG(tensor.defined() || (tensor.ndim() > 0 && tensor.numel() == 0), "{} is not set",
                  name);
  NVLLM_CHECK_MSG(tensor.device() == Device::kCUDA, "{} is on {}, expected cuda", name,
                  device_name(tensor.device()));
  NVLLM_CHECK_MSG(tensor.dtype() == dtype, "{} is {}, expected {}", name, tensor.shape_string(),
                  dtype_name(dtype));
  NVLLM_CHECK_MSG(tensor.ndim() == static_cast<int>(shape.size()),
                  "{} is {}, expected {} dimensions", name, tensor.shape_string(), shape.size());
  int dim = 0;
  for (int64_t expected : shape) {
    NVLLM_CHECK_MSG(expected < 0 || tensor.size(dim) == expected,
                    "{} is {}: dimension {} is {}, expected {}", name, tensor.shape_string(), dim,
                    tensor.size(dim), expected);
    ++dim;
  }
}

// check_device_tensor, and the elements are contiguous.
inline void check_contiguous(const Tensor& tensor, std::string_view name, DType dtype,
                             std::initializer_list<int64_t> shape) {
  check_device_tensor(tensor, name, dtype, shape);
  NVLLM_CHECK_MSG(tensor.is_contiguous(), "{} {} is not contiguous", name, tensor.shape_string());
}

// check_device_tensor for a matrix whose rows are contiguous and stride(0) elements apart
// (a row slice or a column slice of a wider matrix).
inline void check_rows(const Tensor& tensor, std::string_view name, DType dtype,
                       std::initializer_list<int64_t> shape) {
  NVLLM_CHECK_EQ(shape.size(), size_t{2});
  check_device_tensor(tensor, name, dtype, shape);
  NVLLM_CHECK_MSG(tensor.size(1) <= 1 || tensor.stride(1) == 1,
                  "{} {} has a column stride of {}; its rows must be contiguous", name,
                  tensor.shape_string(), tensor.stride(1));
  NVLLM_CHECK_MSG(tensor.size(0) <= 1 || tensor.stride(0) >= tensor.size(1),
                  "{} {} has rows {} elements apart, overlapping", name, tensor.shape_string(),
                  tensor.stride(0));
}

// Positive head counts that divide into groups and an even head_dim.
inline void check_attention_dims(const AttentionDims& dims) {
  NVLLM_CHECK_MSG(dims.num_heads > 0 && dims.num_kv_heads > 0 && dims.head_dim > 0,
                  "attention dims heads {} kv_heads {} head_dim {} must be positive",
                  dims.num_heads, dims.num_kv_heads, dims.head_dim);
  NVLLM_CHECK_MSG(dims.num_heads % dims.num_kv_heads == 0,
                  "{} query heads do not split into groups over {} kv heads", dims.num_heads,
                  dims.num_kv_heads);
  NVLLM_CHECK_MSG(dims.head_dim % 2 == 0, "head_dim {} must be even for rotary embedding",
                  dims.head_dim);
}

// A paged cache [num_blocks, block_size, num_kv_heads, head_dim] for k and v alike.
inline void check_kv_cache(const LayerKVCache& cache, const AttentionDims& dims, DType dtype) {
  check_contiguous(cache.k, "k cache", dtype, {-1, -1, dims.num_kv_heads, dims.head_dim});
  check_contiguous(cache.v, "v cache", dtype,
                   {cache.k.size(0), cache.k.size(1), dims.num_kv_heads, dims.head_dim});
  NVLLM_CHECK_MSG(cache.k.size(1) > 0, "k cache {} has a block size of 0", cache.k.shape_string());
}

}  // namespace nanovllm::cuda
