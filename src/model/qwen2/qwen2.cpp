#include "model/qwen2/qwen2.h"

#include "model/decoder/decoder_config.h"

namespace nanovllm {

ModelConfig read_qwen2_config(const ConfigFields& fields) {
  return read_decoder_config(fields, {.architecture = kQwen2Architecture.name,
                                      .model_type = kQwen2Architecture.model_type,
                                      .qkv_bias = true});
}

}  // namespace nanovllm
