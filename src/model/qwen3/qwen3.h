// Qwen3 dense models (Qwen3ForCausalLM): the dense decoder with an RMSNorm on each q and k
// head and no biases.
#pragma once

#include "model/decoder/decoder_model.h"
#include "model/model_registry.h"

namespace nanovllm {

ModelConfig read_qwen3_config(const ConfigFields& fields);

inline constexpr ModelArchitecture kQwen3Architecture = {
    "Qwen3ForCausalLM", "qwen3", &read_qwen3_config, &check_decoder_split, &load_decoder};

}  // namespace nanovllm
