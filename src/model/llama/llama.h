// Llama models (LlamaForCausalLM, Llama 3.x): the dense decoder without q/k norm or biases,
// with Llama 3's rotary scaling (rope_type "llama3") or none, tied or untied embeddings.
#pragma once

#include "model/decoder/decoder_model.h"
#include "model/model_registry.h"

namespace nanovllm {

ModelConfig read_llama_config(const ConfigFields& fields);

inline constexpr ModelArchitecture kLlamaArchitecture = {
    "LlamaForCausalLM", "llama", &read_llama_config, &check_decoder_split, &load_decoder};

}  // namespace nanovllm
