// Qwen3 weights on a backend's device, in the backend's compute dtype.
#pragma once

#include <filesystem>
#include <vector>

#include "core/buffer.h"
#include "kernels/backend.h"
#include "model/model_config.h"

namespace nanovllm {

// Qwen3's decoder layer is the one the backend's fused decode takes.
using Qwen3LayerWeights = DecoderLayerWeights;

struct Qwen3Weights {
  std::vector<Buffer> storage;  // owns everything the tensors below view
  Tensor embed_tokens;          // [vocab, hidden]
  std::vector<Qwen3LayerWeights> layers;
  Tensor norm;     // [hidden]
  Tensor lm_head;  // [vocab, hidden]; views embed_tokens when tie_word_embeddings
};

enum class LoadFormat { kSafetensors, kDummy };

// Loads model.safetensors or the shards of model.safetensors.index.json from model_dir,
// validating every tensor against the config; kDummy fills random weights of the right shapes
// from the config alone. Throws Error naming the file and the problem.
Qwen3Weights load_qwen3_weights(const std::filesystem::path& model_dir, const ModelConfig& config,
                                Backend& backend, LoadFormat format);

}  // namespace nanovllm
