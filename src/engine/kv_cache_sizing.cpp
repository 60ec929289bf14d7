#include "engine/kv_cache_sizing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "core/check.h"

namespace nanovllm {

namespace {

size_t checked_product(std::initializer_list<size_t> factors, const KVCacheShape& shape) {
  size_t product = 1;
  for (const size_t factor : factors) {
    if (__builtin_mul_overflow(product, factor, &product)) {
      throw Error(fmt::format(
          "KV cache: {} layers x {} kv heads x head_dim {} x block size {} is too large to "
          "address",
          shape.num_layers, shape.num_kv_heads, shape.head_dim, shape.block_size));
    }
  }
  return product;
}

}  // namespace

size_t KVCacheShape::bytes_per_block() const {
  NVLLM_CHECK(num_layers > 0 && num_kv_heads > 0 && head_dim > 0 && block_size > 0);
  return checked_product(
      {2, static_cast<size_t>(num_layers), static_cast<size_t>(block_size),
       static_cast<size_t>(num_kv_heads), static_cast<size_t>(head_dim), dtype_size(dtype)},
      *this);
}

size_t KVCacheShape::bytes_for_blocks(int num_blocks) const {
  NVLLM_CHECK_GT(num_blocks, 0);
  return checked_product({bytes_per_block(), static_cast<size_t>(num_blocks)}, *this);
}

int cpu_num_kvcache_blocks(const KVCacheShape& shape, size_t budget_bytes,
                           size_t available_host_bytes, int max_num_seqs, int max_model_len) {
  const size_t block_bytes = shape.bytes_per_block();
  const size_t bytes = std::min(budget_bytes, available_host_bytes / 2);
  const size_t fitting = bytes / block_bytes;
  if (fitting == 0) {
    throw Error(fmt::format(
        "KV cache: {} bytes of host memory (budget {}, available {}) hold no block of {} "
        "bytes; lower kvcache_block_size or set num_kvcache_blocks",
        bytes, budget_bytes, available_host_bytes, block_bytes));
  }
  const int64_t blocks_per_seq = (max_model_len + shape.block_size - 1) / shape.block_size;
  const int64_t useful = static_cast<int64_t>(max_num_seqs) * blocks_per_seq;
  return static_cast<int>(std::min<int64_t>({static_cast<int64_t>(fitting), useful, INT32_MAX}));
}

int gpu_num_kvcache_blocks(const KVCacheShape& shape, size_t total_bytes, size_t used_bytes,
                           size_t activation_peak_bytes, double gpu_memory_utilization) {
  const size_t block_bytes = shape.bytes_per_block();
  const double available = static_cast<double>(total_bytes) * gpu_memory_utilization -
                           static_cast<double>(used_bytes) -
                           static_cast<double>(activation_peak_bytes);
  const int64_t blocks = available > 0 ? static_cast<int64_t>(available) / block_bytes : 0;
  if (blocks <= 0) {
    throw Error(fmt::format(
        "KV cache: no room for a block of {} bytes (GPU total {}, in use {}, activation peak "
        "{}, gpu_memory_utilization {}); raise gpu_memory_utilization or use a smaller model",
        block_bytes, total_bytes, used_bytes, activation_peak_bytes, gpu_memory_utilization));
  }
  return static_cast<int>(std::min<int64_t>(blocks, INT32_MAX));
}

}  // namespace nanovllm
