// The Hugging Face config.json and generation_config.json of a checkpoint: what the engine needs
// of any architecture, read by the architecture's own reader (model_registry.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace nanovllm {

// Llama 3's rescaling of the rotary frequencies for long contexts (rope_type "llama3"); not
// `enabled`: plain RoPE.
struct RopeScaling {
  bool enabled = false;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

// A mixture-of-experts MLP in place of the dense one (Qwen3-MoE): each token goes through the
// `experts_per_token` experts its router rates highest. Absent (experts == 0): every layer dense.
struct MixtureOfExperts {
  int experts = 0;                 // num_experts (num_local_experts in transformers 5's files)
  int experts_per_token = 0;       // num_experts_per_tok
  int expert_intermediate = 0;     // moe_intermediate_size: each expert's MLP width
  bool normalize_weights = false;  // norm_topk_prob: the chosen probabilities rescaled to sum 1
  int sparse_step = 1;             // decoder_sparse_step: every sparse_step-th layer has experts
  std::vector<int> dense_layers;   // mlp_only_layers: layers with the dense MLP regardless

  bool enabled() const { return experts > 0; }
  // Whether layer `layer` has experts, as transformers' Qwen3MoeDecoderLayer decides it.
  bool is_sparse(int layer) const;
};

struct ModelConfig {
  std::string architecture;  // "Qwen3ForCausalLM" (model_registry.h)
  std::string model_type;    // "qwen3"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // may differ from hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  // What tells the families of the dense decoder apart (model/decoder/decoder_model.h):
  bool qk_norm = false;              // an RMSNorm of each q and k head before rotary (Qwen3)
  bool qkv_bias = false;             // biases on the q, k and v projections (Qwen2)
  MixtureOfExperts moe;              // experts in place of the dense MLP (Qwen3-MoE)
  DType torch_dtype = DType::kBF16;  // "torch_dtype" or, in newer files, "dtype"
  std::vector<int> eos_token_ids;    // config.json's eos_token_id (int or list), may be empty
};

// Reads and validates <dir>/config.json with the reader of the architecture it names; throws
// Error naming the file and the problem (for an unknown architecture, the supported ones).
ModelConfig load_model_config(const std::filesystem::path& model_dir);

struct GenerationConfig {
  std::vector<int> eos_token_ids;  // every id stops generation
};

// Reads <dir>/generation_config.json when present; without it, falls back to config.json's ids.
GenerationConfig load_generation_config(const std::filesystem::path& model_dir,
                                        const ModelConfig& config);

}  // namespace nanovllm
