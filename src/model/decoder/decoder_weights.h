// The dense decoder's weights on a backend's device, in the backend's compute dtype, and where each
// Hugging Face checkpoint tensor goes among them.
#pragma once

#include <filesystem>
#include <vector>

#include "core/buffer.h"
#include "kernels/backend.h"
#include "model/causal_lm.h"
#include "model/model_config.h"
#include "model/weight_loading.h"

namespace nanovllm {

struct DecoderLayerWeights {
  Tensor input_layernorm;           // [hidden]
  Tensor qkv_proj;                  // [(heads + 2 * kv_heads) * head_dim, hidden]: q | k | v rows
  Tensor qkv_bias;                  // [(heads + 2 * kv_heads) * head_dim] with qkv_bias, or none
  Tensor q_norm;                    // [head_dim] with qk_norm, or none
  Tensor k_norm;                    // [head_dim] with qk_norm, or none
  Tensor o_proj;                    // [hidden, heads * head_dim]
  Tensor post_attention_layernorm;  // [hidden]
  // A dense layer's MLP:
  Tensor gate_up_proj;  // [2 * intermediate, hidden]: gate | up rows
  Tensor down_proj;     // [hidden, intermediate]
  // A sparse layer's (MixtureOfExperts::is_sparse) router and experts instead:
  Tensor router;          // [experts, hidden]
  Tensor expert_gate_up;  // [experts, 2 * expert_intermediate, hidden]: each one's gate | up rows
  Tensor expert_down;     // [experts, hidden, expert_intermediate]
};

// The decoder's dimensions on one rank of a tensor-parallel group: its query heads, its KV heads
// (split over the ranks, or, with fewer KV heads than ranks, the one its query heads read,
// replicated as vLLM does), its columns of the MLP (and of every expert's: each rank holds all
// the experts, a slice of each, as vLLM does without expert parallelism) and its rows of the
// vocabulary.
struct DecoderShard {
  TensorParallel tp;
  int heads = 0;     // query heads from heads * tp.rank
  int kv_heads = 0;  // KV heads from first_kv_head
  int first_kv_head = 0;
  int intermediate = 0;         // MLP columns from intermediate * tp.rank
  int expert_intermediate = 0;  // each expert's MLP columns from expert_intermediate * tp.rank
  int vocab = 0;                // embedding and LM-head rows from first_id
  int first_id = 0;

  // Throws Error naming what does not split over tp.size ranks.
  static DecoderShard of(const ModelConfig& config, TensorParallel tp);
};

struct DecoderWeights {
  std::vector<Buffer> storage;  // owns everything the tensors below view
  Tensor embed_tokens;          // [vocab, hidden]
  std::vector<DecoderLayerWeights> layers;
  Tensor norm;     // [hidden]
  Tensor lm_head;  // [vocab, hidden]; views embed_tokens when tie_word_embeddings
};

// Allocates device storage for the weights of `shard`, in the backend's compute dtype.
// lm_head views embed_tokens when the embeddings are tied.
DecoderWeights allocate_decoder_weights(const ModelConfig& config, const DecoderShard& shard,
                                        Backend& backend);

// The checkpoint tensors (or their shards) that fill `weights`: q|k|v land in the rows of
// qkv_proj in that order, gate|up in the rows of gate_up_proj (and of each expert's
// expert_gate_up); q/k/v, gate/up and the vocabulary are split by rows (column-parallel),
// o_proj and down_proj by columns (row-parallel); the router is whole on every rank. With tied
// embeddings there is no lm_head.weight slot (a checkpoint that has one anyway is not read).
WeightLayout decoder_weight_layout(const ModelConfig& config, const DecoderShard& shard,
                                   const DecoderWeights& weights);

// Allocates rank tp.rank's weights and fills them from `source`.
DecoderWeights load_decoder_weights(const ModelConfig& config, const WeightSource& source,
                                    Backend& backend, TensorParallel tp = {});

// The same from `model_dir` (a checkpoint, or dummy values), for tests and tools.
DecoderWeights load_decoder_weights(const std::filesystem::path& model_dir,
                                    const ModelConfig& config, Backend& backend, LoadFormat format,
                                    TensorParallel tp = {});

}  // namespace nanovllm
