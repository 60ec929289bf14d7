// How many KV cache blocks fit a memory budget.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace nanovllm {

struct KVCacheShape {
  int num_layers = 0;
  int num_kv_heads = 0;  // on this device (after tensor-parallel split)
  int head_dim = 0;
  int block_size = 0;
  DType dtype = DType::kBF16;

  // K and V of every layer for block_size tokens. Throws Error when that overflows size_t.
  size_t bytes_per_block() const;
  // bytes_per_block() * num_blocks, with the same check.
  size_t bytes_for_blocks(int num_blocks) const;
};

// Default host-memory budget for the KV cache on CPU, as vLLM's CPU backend (4 GiB).
inline constexpr size_t kDefaultCpuKVCacheBytes = size_t{4} << 30;

// CPU: the budget, but at most half the memory available now, and no more blocks than
// max_num_seqs sequences of max_model_len tokens can use. Throws Error when not even one block
// fits.
int cpu_num_kvcache_blocks(const KVCacheShape& shape, size_t budget_bytes,
                           size_t available_host_bytes, int max_num_seqs, int max_model_len);

// GPU, as nano-vllm: total * utilization, less what is in use now and the activation peak seen
// during warm-up (peak - current allocated). Throws Error when not even one block fits.
int gpu_num_kvcache_blocks(const KVCacheShape& shape, size_t total_bytes, size_t used_bytes,
                           size_t activation_peak_bytes, double gpu_memory_utilization);

}  // namespace nanovllm
