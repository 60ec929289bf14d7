#include "nanovllm/engine_flags.h"

#include "core/check.h"

namespace nanovllm {

void EngineFlags::add_to(CLI::App& command) {
  command.add_option("--device", config.device, "cpu, cuda, or auto (the GPU when there is one)")
      ->capture_default_str();
  command
      .add_option("--dtype", config.dtype,
                  "auto (the checkpoint's on cuda, float32 on cpu), bfloat16, float16 or float32")
      ->capture_default_str();
  command.add_option("--max-num-seqs", config.max_num_seqs, "sequences running at once")
      ->capture_default_str();
  command
      .add_option("--max-num-batched-tokens", config.max_num_batched_tokens,
                  "tokens per prefill step; longer prompts are prefilled in chunks")
      ->capture_default_str();
  command
      .add_option("--max-model-len", config.max_model_len,
                  "longest sequence (prompt + output); clamped to the model's")
      ->capture_default_str();
  command
      .add_option("--gpu-memory-utilization", config.gpu_memory_utilization,
                  "fraction of GPU memory for weights, activations and KV cache")
      ->capture_default_str();
  command.add_option("--tensor-parallel-size", config.tensor_parallel_size)->capture_default_str();
  command.add_flag("--enforce-eager", config.enforce_eager, "no CUDA graphs");
  command.add_option("--kvcache-block-size", config.kvcache_block_size, "tokens per KV block")
      ->capture_default_str();
  command
      .add_option("--num-kvcache-blocks", config.num_kvcache_blocks,
                  "KV cache blocks; -1 sizes the cache from the memory budget")
      ->capture_default_str();
  command.add_flag("--no-prefix-caching", no_prefix_caching, "do not reuse cached prompt prefixes");
  command.add_flag("--no-async-scheduling", no_async_scheduling,
                   "wait for each decode step's tokens before planning the next");
  command
      .add_option("--load-format", config.load_format,
                  "safetensors, or dummy for random weights from config.json alone")
      ->capture_default_str();
}

EngineConfig EngineFlags::resolve() const {
  EngineConfig resolved = config;
  resolved.enable_prefix_caching = !no_prefix_caching;
  resolved.async_scheduling = !no_async_scheduling;
  resolved.validate();
  return resolved;
}

void SamplingFlags::add_to(CLI::App& command) {
  command.add_option("--temperature", params.temperature, "0 = greedy")->capture_default_str();
  command.add_option("--max-tokens", params.max_tokens, "tokens to generate at most")
      ->capture_default_str();
  command.add_option("--top-k", params.top_k, "0 or -1 = off")->capture_default_str();
  command.add_option("--top-p", params.top_p, "nucleus sampling, in (0, 1]")->capture_default_str();
  command.add_flag("--ignore-eos", params.ignore_eos, "keep generating past EOS tokens");
  command.add_option("--seed", seed, "per-request seed (same seed, same output); -1 = none")
      ->capture_default_str();
}

SamplingParams SamplingFlags::resolve() const {
  SamplingParams resolved = params;
  if (seed < -1) throw Error("--seed must be -1 (none) or a non-negative integer");
  if (seed >= 0) resolved.seed = static_cast<uint64_t>(seed);
  resolved.validate();
  return resolved;
}

}  // namespace nanovllm
