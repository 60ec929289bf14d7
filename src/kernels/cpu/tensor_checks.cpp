#include "kernels/cpu/tensor_checks.h"

namespace nanovllm::cpu {

void check_tensor(const Tensor& tensor, std::string_view name, DType dtype, int ndim) {
  NVLLM_CHECK_MSG(tensor.defined() || (tensor.ndim() > 0 && tensor.numel() == 0), "{} is not set",
                  name);
  NVLLM_CHECK_MSG(tensor.device() == Device::kCPU, "{} is on {}, expected cpu", name,
                  device_name(tensor.device()));
  NVLLM_CHECK_MSG(tensor.dtype() == dtype, "{} is {}, expected {}", name, tensor.shape_string(),
                  dtype_name(dtype));
  NVLLM_CHECK_MSG(tensor.ndim() == ndim, "{} is {}, expected {} dimensions", name,
                  tensor.shape_string(), ndim);
  NVLLM_CHECK_MSG(tensor.is_contiguous(), "{} {} is not contiguous", name, tensor.shape_string());
}

void check_shape(const Tensor& tensor, std::string_view name, DType dtype,
                 std::initializer_list<int64_t> shape) {
  check_tensor(tensor, name, dtype, static_cast<int>(shape.size()));
  int dim = 0;
  for (int64_t expected : shape) {
    NVLLM_CHECK_MSG(expected < 0 || tensor.size(dim) == expected,
                    "{} is {}: dimension {} is {}, expected {}", name, tensor.shape_string(), dim,
                    tensor.size(dim), expected);
    ++dim;
  }
}

void check_qkv(const Tensor& qkv, const AttentionDims& dims) {
  NVLLM_CHECK_MSG(dims.num_heads > 0 && dims.num_kv_heads > 0 && dims.head_dim > 0,
                  "attention dims heads {} kv_heads {} head_dim {} must be positive",
                  dims.num_heads, dims.num_kv_heads, dims.head_dim);
  NVLLM_CHECK_MSG(dims.num_heads % dims.num_kv_heads == 0,
                  "{} query heads do not split into groups over {} kv heads", dims.num_heads,
                  dims.num_kv_heads);
  NVLLM_CHECK_MSG(dims.head_dim % 2 == 0, "head_dim {} must be even for rotary embedding",
                  dims.head_dim);
  check_shape(qkv, "qkv", DType::kF32, {-1, dims.qkv_size()});
}

void check_kv_cache(const LayerKVCache& cache, const AttentionDims& dims) {
  check_shape(cache.k, "k cache", DType::kF32, {-1, -1, dims.num_kv_heads, dims.head_dim});
  check_shape(cache.v, "v cache", DType::kF32,
              {cache.k.size(0), cache.k.size(1), dims.num_kv_heads, dims.head_dim});
  NVLLM_CHECK_MSG(cache.k.size(1) > 0, "k cache {} has a block size of 0", cache.k.shape_string());
}

}  // namespace nanovllm::cpu
