// The Qwen3 forward pass, straight-line code over the Backend ops.
#pragma once

#include <vector>

#include "kernels/backend.h"
#include "model/model_config.h"
#include "model/qwen3_weights.h"

namespace nanovllm {

// One scheduled batch in device tensors (int32), prepared by the ModelRunner.
struct ForwardBatch {
  Tensor input_ids;           // [T]
  Tensor positions;           // [T]
  Tensor last_token_indices;  // [B] rows whose logits are computed
  AttentionMetadata attention;
};

class Qwen3Model {
 public:
  Qwen3Model(const ModelConfig& config, Qwen3Weights weights, Backend& backend);

  const ModelConfig& config() const { return config_; }
  AttentionDims attention_dims() const;

  // Runs the batch, writing this step's K/V into kv_cache (one entry per layer), and returns
  // fp32 logits [B, vocab] on the backend's device, valid until the next forward.
  Tensor forward(const ForwardBatch& batch, const std::vector<LayerKVCache>& kv_cache);

 private:
  ModelConfig config_;
  Qwen3Weights weights_;
  Backend& backend_;
  // Activations, grown on demand; the cos/sin table for rotary embedding.
  // (Implementation detail, see qwen3_model.cpp.)
  struct Workspace;
  std::shared_ptr<Workspace> workspace_;
};

}  // namespace nanovllm
