#include "model/qwen3_moe/qwen3_moe.h"

#include "model/decoder/decoder_config.h"

namespace nanovllm {

ModelConfig read_qwen3_moe_config(const ConfigFields& fields) {
  // As Qwen3Config, Qwen3MoeConfig defaults head_dim to 128.
  return read_decoder_config(fields, {.architecture = kQwen3MoeArchitecture.name,
                                      .model_type = kQwen3MoeArchitecture.model_type,
                                      .default_head_dim = 128,
                                      .qk_norm = true,
                                      .experts = true});
}

}  // namespace nanovllm
