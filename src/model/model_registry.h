// The architectures this build serves, chosen by config.json's "architectures" (or, where a
// config has none, its "model_type"). Adding one is a folder model/<family>/ that defines a
// ModelArchitecture, and a line in model_registry.cpp.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string_view>

#include "kernels/backend.h"
#include "model/causal_lm.h"
#include "model/config_fields.h"
#include "model/model_config.h"
#include "model/weight_loading.h"

namespace nanovllm {

struct ModelArchitecture {
  std::string_view name;        // config.json's "architectures" entry: "Qwen3ForCausalLM"
  std::string_view model_type;  // config.json's "model_type": "qwen3"
  // Reads config.json, refusing every option the architecture does not implement.
  ModelConfig (*read_config)(const ConfigFields& fields);
  // Throws Error naming what of the model does not split over `ranks` tensor-parallel ranks.
  void (*check_split)(const ModelConfig& config, int ranks);
  // Takes device memory for rank `tp.rank`'s weights, fills them from `weights` and builds
  // the model. Throws Error, before reading any weight, when the model does not split over
  // `tp.size` ranks.
  std::unique_ptr<CausalLM> (*load)(const ModelConfig& config, const WeightSource& weights,
                                    Backend& backend, TensorParallel tp);
};

std::span<const ModelArchitecture* const> model_architectures();

// The architecture a config.json names; Error naming the supported ones for any other.
const ModelArchitecture& find_architecture(const ConfigFields& fields);
// The architecture of a config load_model_config read.
const ModelArchitecture& find_architecture(const ModelConfig& config);

// The model of `config` (read by load_model_config) with rank `tp.rank`'s weights from
// `model_dir`.
std::unique_ptr<CausalLM> load_causal_lm(const std::filesystem::path& model_dir,
                                         const ModelConfig& config, Backend& backend,
                                         LoadFormat format, TensorParallel tp = {});

}  // namespace nanovllm
