// Loading Qwen3 weights: match the checkpoint's tensors against the layout the config implies,
// check every shape and dtype before copying anything, then convert and upload tensor by tensor.
#include "model/qwen3_weights.h"

#include <chrono>
#include <optional>
#include <set>
#include <string>

#include "core/check.h"
#include "core/logging.h"
#include "model/dummy_weights.h"
#include "model/qwen3_weight_layout.h"
#include "model/safetensors.h"
#include "model/weight_conversion.h"

namespace nanovllm {
namespace {

constexpr size_t kListedNames = 5;

std::string first_few(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < kListedNames; ++i) {
    text += (i ? ", " : "") + names[i];
  }
  if (names.size() > kListedNames)
    text += fmt::format(", ... ({} more)", names.size() - kListedNames);
  return text;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return text + "]";
}

// Pairs every slot with its checkpoint tensor; a missing, unexpected, mis-typed or mis-shaped
// tensor is an Error.
std::vector<const SafetensorsTensor*> match_checkpoint(const SafetensorsCheckpoint& checkpoint,
                                                       const ModelConfig& config,
                                                       const std::vector<WeightSlot>& slots) {
  std::vector<const SafetensorsTensor*> matched;
  std::vector<std::string> missing;
  std::set<std::string, std::less<>> expected;
  for (const WeightSlot& slot : slots) {
    expected.insert(slot.name);
    matched.push_back(checkpoint.find(slot.name));
    if (matched.back() == nullptr) missing.push_back(slot.name);
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, tensor] : checkpoint.tensors()) {
    if (expected.count(name)) continue;
    if (config.tie_word_embeddings && name == "lm_head.weight") {
      // Some tied checkpoints ship the (identical) head anyway; the embedding is what is used.
      NVLLM_LOG_DEBUG("{}: ignoring lm_head.weight: tie_word_embeddings is set",
                      tensor->file.string());
      continue;
    }
    unexpected.push_back(fmt::format("{} (in {})", name, tensor->file.filename().string()));
  }
  if (!missing.empty() || !unexpected.empty()) {
    std::string problem = fmt::format(
        "{}: tensors do not match config.json ({} layers, tie_word_embeddings={}):",
        checkpoint.source().string(), config.num_hidden_layers, config.tie_word_embeddings);
    if (!missing.empty()) {
      problem += fmt::format(" missing {} tensor(s): {}", missing.size(), first_few(missing));
    }
    if (!unexpected.empty()) {
      problem += fmt::format("{} unexpected {} tensor(s): {}", missing.empty() ? "" : ";",
                             unexpected.size(), first_few(unexpected));
    }
    throw Error(problem);
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    const SafetensorsTensor& tensor = *matched[i];
    if (!is_floating(tensor.dtype)) {
      throw Error(fmt::format("{}: tensor '{}' has dtype {}; weights must be BF16, F16 or F32",
                              tensor.file.string(), tensor.name, dtype_name(tensor.dtype)));
    }
    if (tensor.shape != slots[i].shape) {
      throw Error(fmt::format("{}: tensor '{}' has shape {} but config.json implies {}",
                              tensor.file.string(), tensor.name, tensor.shape_string(),
                              shape_string(slots[i].shape)));
    }
  }
  return matched;
}

void load_checkpoint(const SafetensorsCheckpoint& checkpoint, const ModelConfig& config,
                     const std::vector<WeightSlot>& slots, Backend& backend) {
  const std::vector<const SafetensorsTensor*> matched = match_checkpoint(checkpoint, config, slots);
  const DType dtype = backend.compute_dtype();
  StagedUploader uploader(backend);
  for (size_t i = 0; i < slots.size(); ++i) {
    const SafetensorsTensor& tensor = *matched[i];
    if (tensor.dtype == dtype) {
      // Already in the compute dtype: straight from the file mapping to the device.
      NVLLM_CHECK_EQ(tensor.nbytes, slots[i].destination.nbytes());
      backend.upload(slots[i].destination, tensor.data);
      continue;
    }
    const size_t source_size = dtype_size(tensor.dtype);
    uploader.upload(slots[i].destination, [&](void* host, int64_t first, int64_t count) {
      const int64_t overflows = convert_elements_parallel(tensor.data + first * source_size,
                                                          tensor.dtype, host, dtype, count);
      if (overflows > 0) {
        throw Error(fmt::format("{}: tensor '{}' has {} value(s) outside the {} range",
                                tensor.file.string(), tensor.name, overflows, dtype_name(dtype)));
      }
    });
  }
}

}  // namespace

Qwen3Weights load_qwen3_weights(const std::filesystem::path& model_dir, const ModelConfig& config,
                                Backend& backend, LoadFormat format) {
  const auto start = std::chrono::steady_clock::now();
  // Broken files are reported before any device memory is taken.
  std::optional<SafetensorsCheckpoint> checkpoint;
  if (format == LoadFormat::kSafetensors) checkpoint = SafetensorsCheckpoint::open(model_dir);
  Qwen3Weights weights = allocate_qwen3_weights(config, backend);
  const std::vector<WeightSlot> slots = qwen3_weight_slots(config, weights);
  if (checkpoint) {
    load_checkpoint(*checkpoint, config, slots, backend);
  } else {
    fill_dummy_weights(slots, backend);
  }
  size_t bytes = 0;
  for (const Buffer& buffer : weights.storage) bytes += buffer.bytes();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  NVLLM_LOG_INFO("{} weights: {} tensors, {:.1f} MiB in {} on {}, {:.2f} s",
                 format == LoadFormat::kDummy ? "dummy" : "loaded", slots.size(), bytes / 1048576.0,
                 dtype_name(backend.compute_dtype()), device_name(backend.device()), seconds);
  return weights;
}

}  // namespace nanovllm
