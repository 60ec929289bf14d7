#include "model/llama/llama.h"

#include "model/decoder/decoder_config.h"

namespace nanovllm {

ModelConfig read_llama_config(const ConfigFields& fields) {
  return read_decoder_config(fields, {.architecture = kLlamaArchitecture.name,
                                      .model_type = kLlamaArchitecture.model_type,
                                      .llama3_rope = true});
}

}  // namespace nanovllm
