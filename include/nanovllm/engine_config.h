// Engine settings, named and defaulted as nano-vllm's Config.
#pragma once

#include <cstdint>
#include <string>

namespace nanovllm {

struct EngineConfig {
  int max_num_batched_tokens = 16384;  // tokens per prefill step (longer prompts are chunked)
  int max_num_seqs = 512;              // sequences running at once
  int max_model_len = 4096;            // clamped to the model's max_position_embeddings
  float gpu_memory_utilization = 0.9f;
  int tensor_parallel_size = 1;
  bool enforce_eager = false;    // no CUDA graphs
  int kvcache_block_size = 256;  // tokens per KV cache block
  int num_kvcache_blocks = -1;   // -1 = sized from the memory budget
  bool enable_prefix_caching = true;
  // Decode steps are planned and started while the step before is still on the device (its
  // sampled tokens become the next step's input there), so the host's work overlaps the
  // device's. Outputs are the same either way.
  bool async_scheduling = true;
  std::string device = "auto";  // "cpu" | "cuda" | "auto" (the GPU when there is one)
  // "auto" (the checkpoint's dtype on CUDA, float32 on the CPU) | "bfloat16" | "float16" |
  // "float32": weights, activations and KV cache; accumulation and norms are fp32.
  std::string dtype = "auto";
  std::string load_format = "safetensors";  // "safetensors" | "dummy" (random weights)
  uint64_t seed = 0;  // seeds the random streams of requests that bring no seed of their own

  // Throws nanovllm::Error (core/check.h) naming the first invalid field.
  void validate() const;

  // max_model_len limited by what the model's position embeddings support.
  int resolved_max_model_len(int max_position_embeddings) const;
};

}  // namespace nanovllm
