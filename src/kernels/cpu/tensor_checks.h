// Argument checks shared by the CPU ops; each failure throws Error naming the tensor and
// printing what was expected next to what was given.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "kernels/backend.h"

namespace nanovllm::cpu {

// A contiguous CPU tensor of `dtype` with `ndim` dimensions.
void check_tensor(const Tensor& tensor, std::string_view name, DType dtype, int ndim);

// check_tensor plus the exact shape; pass -1 for a dimension that may be anything.
void check_shape(const Tensor& tensor, std::string_view name, DType dtype,
                 std::initializer_list<int64_t> shape);

// Head counts that divide evenly, an even head_dim, and a qkv tensor [T, dims.qkv_size()].
void check_qkv(const Tensor& qkv, const AttentionDims& dims);

// A paged cache [num_blocks, block_size, num_kv_heads, head_dim] for k and v alike.
void check_kv_cache(const LayerKVCache& cache, const AttentionDims& dims);

}  // namespace nanovllm::cpu
