// The Qwen3 forward pass, straight-line code over the Backend ops.
#pragma once

#include <memory>
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
  // Checks every weight's shape against the config. Intermediate tensors are dumped when
  // NANOVLLM_DUMP_DIR is set (see tensor_dump.h and qwen3_model.cpp for the names).
  Qwen3Model(const ModelConfig& config, Qwen3Weights weights, Backend& backend);

  const ModelConfig& config() const { return config_; }
  AttentionDims attention_dims() const;
  // Whether forward() dumps its intermediates (NANOVLLM_DUMP_DIR), which copies to the host and
  // so cannot be captured in a graph.
  bool dumps_tensors() const;

  // Sizes the activation buffers for batches of up to `tokens` rows and `logit_rows` logit
  // rows, so later forwards allocate nothing (what a captured graph needs: a buffer that grew
  // after the capture would leave the graph naming freed memory).
  void reserve(int64_t tokens, int64_t logit_rows);

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

// The rotary table [max_positions, head_dim]: row p holds cos(p * inv_freq) for the first
// head_dim / 2 columns and sin(p * inv_freq) for the rest, inv_freq[i] = 1 / theta^(2i / head_dim).
// Computed in float32 step by step as Hugging Face's Qwen3 (and nano-vllm) do, so angles at
// positions in the thousands round the same way.
std::vector<float> rotary_cos_sin_table(int max_positions, int head_dim, double theta);

}  // namespace nanovllm
