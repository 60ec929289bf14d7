// Reading config.json for the families of the dense decoder (decoder_model.h): one reader with
// transformers' semantics, told by the family what its config class defaults and allows.
#pragma once

#include <string_view>

#include "model/config_fields.h"
#include "model/model_config.h"

namespace nanovllm {

struct DecoderFamily {
  std::string_view architecture;  // "Qwen3ForCausalLM"
  std::string_view model_type;    // "qwen3"
  int default_head_dim = 0;       // without "head_dim" (0: hidden_size / num_attention_heads)
  bool qk_norm = false;           // ModelConfig::qk_norm
  bool qkv_bias = false;          // ModelConfig::qkv_bias
  bool llama3_rope = false;       // whether rope_type "llama3" is read (else refused)
  bool experts = false;           // whether the MLP may be a mixture of experts (Qwen3-MoE)
};

// Throws Error naming the file, the field and the problem for anything the family's model
// cannot compute as transformers would.
ModelConfig read_decoder_config(const ConfigFields& fields, const DecoderFamily& family);

}  // namespace nanovllm
