#include "model/model_registry.h"

#include <fmt/format.h>

#include <string>

#include "core/check.h"
#include "core/json_input.h"
#include "model/llama/llama.h"
#include "model/qwen2/qwen2.h"
#include "model/qwen3/qwen3.h"
#include "model/qwen3_moe/qwen3_moe.h"

namespace nanovllm {
namespace {

constexpr const ModelArchitecture* kArchitectures[] = {
    &kQwen3Architecture,
    &kQwen3MoeArchitecture,
    &kQwen2Architecture,
    &kLlamaArchitecture,
};

std::string supported_names() {
  std::string names;
  for (const ModelArchitecture* architecture : kArchitectures) {
    names += fmt::format("{}{} (model_type \"{}\")", names.empty() ? "" : ", ", architecture->name,
                         architecture->model_type);
  }
  return names;
}

}  // namespace

std::span<const ModelArchitecture* const> model_architectures() {
  return kArchitectures;
}

const ModelArchitecture& find_architecture(const ConfigFields& fields) {
  if (const nlohmann::json* names = fields.find("architectures")) {
    if (!names->is_array() || names->empty() || !(*names)[0].is_string()) {
      fields.fail("architectures",
                  fmt::format("must be a non-empty list of names, got {}", json_excerpt(*names)));
    }
    const std::string name = (*names)[0].get<std::string>();
    for (const ModelArchitecture* architecture : kArchitectures) {
      if (architecture->name == name) return *architecture;
    }
    fields.fail("architectures", fmt::format("names \"{}\", which this build does not serve; it "
                                             "serves {}",
                                             name, supported_names()));
  }
  const std::string type = fields.string("model_type", "");
  if (type.empty()) {
    fields.fail("model_type", "is required (with no 'architectures' to go by) but missing");
  }
  for (const ModelArchitecture* architecture : kArchitectures) {
    if (architecture->model_type == type) return *architecture;
  }
  fields.fail("model_type", fmt::format("is \"{}\", which this build does not serve; it serves {}",
                                        type, supported_names()));
}

const ModelArchitecture& find_architecture(const ModelConfig& config) {
  for (const ModelArchitecture* architecture : kArchitectures) {
    if (architecture->name == config.architecture) return *architecture;
  }
  throw Error(fmt::format("no architecture \"{}\"; this build serves {}", config.architecture,
                          supported_names()));
}

std::unique_ptr<CausalLM> load_causal_lm(const std::filesystem::path& model_dir,
                                         const ModelConfig& config, Backend& backend,
                                         LoadFormat format, TensorParallel tp) {
  const ModelArchitecture& architecture = find_architecture(config);
  const WeightSource weights = WeightSource::open(model_dir, format);
  return architecture.load(config, weights, backend, tp);
}

}  // namespace nanovllm
