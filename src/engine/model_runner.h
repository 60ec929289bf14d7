// Runs scheduled batches through Qwen3Model on a Backend: owns the paged KV cache, lays out
// each step's inputs in preallocated buffers, samples on the host.
#pragma once

#include <vector>

#include "core/buffer.h"
#include "engine/batch_inputs.h"
#include "engine/kv_cache_sizing.h"
#include "engine/model_executor.h"
#include "engine/sampler.h"
#include "kernels/backend.h"
#include "model/qwen3_model.h"
#include "nanovllm/engine_config.h"

namespace nanovllm {

class ModelRunner final : public ModelExecutor {
 public:
  // `backend` and `model` must outlive the runner. Sizes the KV cache unless
  // config.num_kvcache_blocks gives its block count.
  ModelRunner(const EngineConfig& config, Backend& backend, Qwen3Model& model);

  ExecutorLimits limits() const override { return limits_; }
  void execute(const ScheduledBatch& batch, std::vector<SampleResult>& samples_out) override;

  size_t kv_cache_bytes() const { return kv_buffer_.bytes(); }

 private:
  int choose_num_kvcache_blocks(const EngineConfig& config) const;
  void allocate_kv_cache();
  void upload_inputs();
  ForwardBatch forward_batch() const;

  Backend& backend_;
  Qwen3Model& model_;
  ExecutorLimits limits_;
  KVCacheShape kv_shape_;
  Buffer kv_buffer_;                    // K and V of every layer, one allocation
  std::vector<LayerKVCache> kv_cache_;  // per layer: [num_blocks, block_size, kv_heads, head_dim]
  BatchInputs host_inputs_;
  // Device copies of host_inputs_, int32, sized for the largest step.
  Buffer input_ids_, positions_, slot_mapping_, cu_seqlens_q_, context_lens_, block_tables_,
      last_token_indices_;
  std::vector<float> host_logits_;  // fp32 [rows, vocab] when logits live on a device
  Sampler sampler_;
  std::vector<Sampler::Row> sample_rows_;
};

}  // namespace nanovllm
