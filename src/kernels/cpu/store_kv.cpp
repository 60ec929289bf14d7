#include <cstring>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"

namespace nanovllm::cpu {

void store_kv(const Tensor& qkv, const LayerKVCache& cache, const AttentionMetadata& metadata,
              const AttentionDims& dims, ThreadPool& pool) {
  check_qkv(qkv, dims);
  check_kv_cache(cache, dims);
  const int64_t tokens = qkv.size(0);
  check_shape(metadata.slot_mapping, "slot_mapping", DType::kI32, {tokens});

  const int64_t num_slots = cache.k.size(0) * cache.k.size(1);
  const int32_t* slots = metadata.slot_mapping.data_as<int32_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    NVLLM_CHECK_MSG(slots[t] >= -1 && slots[t] < num_slots,
                    "slot {} of token {} is outside the cache's {} slots", slots[t], t, num_slots);
  }

  const int64_t row_width = dims.qkv_size();
  const int64_t kv_width = dims.kv_size();  // one slot: [num_kv_heads, head_dim]
  const float* src = qkv.data_as<float>();
  float* k_cache = cache.k.data_as<float>();
  float* v_cache = cache.v.data_as<float>();
  const size_t kv_bytes = static_cast<size_t>(kv_width) * sizeof(float);
  pool.parallel_for(tokens, kv_width, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      if (slots[t] < 0) continue;
      const float* k = src + t * row_width + dims.q_size();
      const float* v = k + kv_width;
      std::memcpy(k_cache + slots[t] * kv_width, k, kv_bytes);
      std::memcpy(v_cache + slots[t] * kv_width, v, kv_bytes);
    }
  });
}

}  // namespace nanovllm::cpu
