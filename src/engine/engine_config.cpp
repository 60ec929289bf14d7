#include "nanovllm/engine_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace nanovllm {
namespace {

[[noreturn]] void reject(const std::string& message) {
  throw Error("invalid engine config: " + message);
}

}  // namespace

void EngineConfig::validate() const {
  if (max_num_batched_tokens < 1)
    reject(
        fmt::format("max_num_batched_tokens must be at least 1, got {}", max_num_batched_tokens));
  if (max_num_seqs < 1)
    reject(fmt::format("max_num_seqs must be at least 1, got {}", max_num_seqs));
  if (max_model_len < 1)
    reject(fmt::format("max_model_len must be at least 1, got {}", max_model_len));
  if (!std::isfinite(gpu_memory_utilization) || gpu_memory_utilization <= 0.0f ||
      gpu_memory_utilization > 1.0f)
    reject(fmt::format("gpu_memory_utilization must be in (0, 1], got {}", gpu_memory_utilization));
  if (tensor_parallel_size < 1 || tensor_parallel_size > 8)
    reject(fmt::format("tensor_parallel_size must be in [1, 8], got {}", tensor_parallel_size));
  if (kvcache_block_size < 1)
    reject(fmt::format("kvcache_block_size must be at least 1, got {}", kvcache_block_size));
  if (num_kvcache_blocks != -1 && num_kvcache_blocks < 1)
    reject(fmt::format("num_kvcache_blocks must be -1 (computed) or at least 1, got {}",
                       num_kvcache_blocks));
  if (device != "cpu" && device != "cuda" && device != "auto")
    reject(fmt::format("device must be 'cpu', 'cuda' or 'auto', got '{}'", device));
  if (dtype != "auto" && dtype != "bfloat16" && dtype != "float16" && dtype != "float32")
    reject(
        fmt::format("dtype must be 'auto', 'bfloat16', 'float16' or 'float32', got '{}'", dtype));
  if (load_format != "safetensors" && load_format != "dummy")
    reject(fmt::format("load_format must be 'safetensors' or 'dummy', got '{}'", load_format));
}

int EngineConfig::resolved_max_model_len(int max_position_embeddings) const {
  if (max_position_embeddings <= 0) return max_model_len;
  return std::min(max_model_len, max_position_embeddings);
}

}  // namespace nanovllm
