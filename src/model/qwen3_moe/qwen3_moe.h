// Qwen3 mixture-of-experts models (Qwen3MoeForCausalLM: Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's
// attention, and in each sparse layer a router and experts in place of the dense MLP.
#pragma once

#include "model/decoder/decoder_model.h"
#include "model/model_registry.h"

namespace nanovllm {

ModelConfig read_qwen3_moe_config(const ConfigFields& fields);

inline constexpr ModelArchitecture kQwen3MoeArchitecture = {"Qwen3MoeForCausalLM", "qwen3_moe",
                                                            &read_qwen3_moe_config,
                                                            &check_decoder_split, &load_decoder};

}  // namespace nanovllm
