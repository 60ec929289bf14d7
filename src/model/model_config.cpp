// Reading a checkpoint's config.json through its architecture, and generation_config.json.
#include "model/model_config.h"

#include "model/config_fields.h"
#include "model/json_file.h"
#include "model/model_registry.h"

namespace nanovllm {

using nlohmann::json;

bool MixtureOfExperts::is_sparse(int layer) const {
  if (!enabled()) return false;
  for (int dense : dense_layers) {
    if (dense == layer) return false;
  }
  return (layer + 1) % sparse_step == 0;
}

ModelConfig load_model_config(const std::filesystem::path& model_dir) {
  const std::filesystem::path file = model_dir / "config.json";
  const json root = read_json_file(file);
  const ConfigFields fields(root, file);
  const ModelArchitecture& architecture = find_architecture(fields);
  ModelConfig config = architecture.read_config(fields);
  config.architecture = architecture.name;
  return config;
}

GenerationConfig load_generation_config(const std::filesystem::path& model_dir,
                                        const ModelConfig& config) {
  const std::filesystem::path file = model_dir / "generation_config.json";
  GenerationConfig generation;
  generation.eos_token_ids = config.eos_token_ids;
  std::error_code ignored;
  if (!std::filesystem::exists(file, ignored)) return generation;

  const json root = read_json_file(file);
  const ConfigFields fields(root, file);
  if (const json* eos = fields.find("eos_token_id")) {
    generation.eos_token_ids = fields.token_ids("eos_token_id", *eos);
  }
  return generation;
}

}  // namespace nanovllm
