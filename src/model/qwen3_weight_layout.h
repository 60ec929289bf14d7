// Where each Hugging Face Qwen3 checkpoint tensor goes in Qwen3Weights.
#pragma once

#include <string>
#include <vector>

#include "model/qwen3_weights.h"

namespace nanovllm {

struct WeightSlot {
  std::string name;            // checkpoint name, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // the shape the checkpoint must have
  Tensor destination;          // device view of that shape: a tensor, or rows of a merged one
  bool is_norm_gain = false;   // an RMSNorm weight (initialized to ones by the dummy loader)
};

// Allocates device storage for every weight of `config`, in the backend's compute dtype.
// lm_head views embed_tokens when the embeddings are tied.
Qwen3Weights allocate_qwen3_weights(const ModelConfig& config, Backend& backend);

// The checkpoint tensors that fill `weights` (allocated for `config`): q|k|v land in the rows
// of qkv_proj in that order, gate|up in the rows of gate_up_proj. With tied embeddings there is
// no lm_head.weight slot.
std::vector<WeightSlot> qwen3_weight_slots(const ModelConfig& config, const Qwen3Weights& weights);

}  // namespace nanovllm
