// Qwen3's weights on a backend's device, in the backend's compute dtype, and where each Hugging
// Face checkpoint tensor goes among them.
#pragma once

#include <filesystem>
#include <vector>

#include "core/buffer.h"
#include "kernels/backend.h"
#include "model/model_config.h"
#include "model/weight_loading.h"

namespace nanovllm {

struct Qwen3LayerWeights {
  Tensor input_layernorm;           // [hidden]
  Tensor qkv_proj;                  // [(heads + 2 * kv_heads) * head_dim, hidden]: q | k | v rows
  Tensor q_norm;                    // [head_dim]
  Tensor k_norm;                    // [head_dim]
  Tensor o_proj;                    // [hidden, heads * head_dim]
  Tensor post_attention_layernorm;  // [hidden]
  Tensor gate_up_proj;              // [2 * intermediate, hidden]: gate | up rows
  Tensor down_proj;                 // [hidden, intermediate]
};

struct Qwen3Weights {
  std::vector<Buffer> storage;  // owns everything the tensors below view
  Tensor embed_tokens;          // [vocab, hidden]
  std::vector<Qwen3LayerWeights> layers;
  Tensor norm;     // [hidden]
  Tensor lm_head;  // [vocab, hidden]; views embed_tokens when tie_word_embeddings
};

// Allocates device storage for every weight of `config`, in the backend's compute dtype.
// lm_head views embed_tokens when the embeddings are tied.
Qwen3Weights allocate_qwen3_weights(const ModelConfig& config, Backend& backend);

// The checkpoint tensors that fill `weights` (allocated for `config`): q|k|v land in the rows
// of qkv_proj in that order, gate|up in the rows of gate_up_proj. With tied embeddings there is
// no lm_head.weight slot (a checkpoint that has one anyway is not read).
WeightLayout qwen3_weight_layout(const ModelConfig& config, const Qwen3Weights& weights);

// Allocates the weights and fills them from `source`.
Qwen3Weights load_qwen3_weights(const ModelConfig& config, const WeightSource& source,
                                Backend& backend);

// The same from `model_dir` (a checkpoint, or dummy values), for tests and tools.
Qwen3Weights load_qwen3_weights(const std::filesystem::path& model_dir, const ModelConfig& config,
                                Backend& backend, LoadFormat format);

}  // namespace nanovllm
