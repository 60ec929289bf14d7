#include "model/qwen3/qwen3.h"

#include "model/decoder/decoder_config.h"

namespace nanovllm {

ModelConfig read_qwen3_config(const ConfigFields& fields) {
  // transformers' Qwen3Config defaults head_dim to 128, not hidden / heads.
  return read_decoder_config(fields, {.architecture = kQwen3Architecture.name,
                                      .model_type = kQwen3Architecture.model_type,
                                      .default_head_dim = 128,
                                      .qk_norm = true});
}

}  // namespace nanovllm
