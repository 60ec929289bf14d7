// Qwen2 and Qwen2.5 models (Qwen2ForCausalLM): the dense decoder with biases on the q, k and v
// projections and no q/k norm. Sliding-window attention is refused.
#pragma once

#include "model/decoder/decoder_model.h"
#include "model/model_registry.h"

namespace nanovllm {

ModelConfig read_qwen2_config(const ConfigFields& fields);

inline constexpr ModelArchitecture kQwen2Architecture = {
    "Qwen2ForCausalLM", "qwen2", &read_qwen2_config, &check_decoder_split, &load_decoder};

}  // namespace nanovllm
