// Loading weights: match the checkpoint's tensors against the layout, check every shape and dtype
// before copying anything, then convert and upload tensor by tensor.
#include "model/weight_loading.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <string>

#include "core/check.h"
#include "core/logging.h"
#include "model/dummy_weights.h"
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
                                                       const WeightLayout& layout) {
  const std::vector<WeightSlot>& slots = layout.slots;
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
    if (std::find(layout.unused.begin(), layout.unused.end(), name) != layout.unused.end()) {
      NVLLM_LOG_DEBUG("{}: ignoring {}: the model does not read it", tensor->file.string(), name);
      continue;
    }
    unexpected.push_back(fmt::format("{} (in {})", name, tensor->file.filename().string()));
  }
  if (!missing.empty() || !unexpected.empty()) {
    std::string problem = fmt::format(
        "{}: tensors do not match config.json ({}):", checkpoint.source().string(), layout.summary);
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

void load_checkpoint(const SafetensorsCheckpoint& checkpoint, const WeightLayout& layout,
                     Backend& backend) {
  const std::vector<WeightSlot>& slots = layout.slots;
  const std::vector<const SafetensorsTensor*> matched = match_checkpoint(checkpoint, layout);
  const DType dtype = backend.compute_dtype();
  StagedUploader uploader(backend);
  for (size_t i = 0; i < slots.size(); ++i) {
    const SafetensorsTensor& tensor = *matched[i];
    const WeightSlot& slot = slots[i];
    const size_t source_size = dtype_size(tensor.dtype);
    if (tensor.dtype == dtype && slot.shard.dim != 1) {
      // Already in the compute dtype, and contiguous in the file: straight from the file
      // mapping to the device.
      NVLLM_CHECK_LE(slot.destination.nbytes(), tensor.nbytes);
      backend.upload(slot.destination, tensor.data + slot.source_index(0) * source_size);
      continue;
    }
    const size_t target_size = dtype_size(dtype);
    uploader.upload(slot.destination, [&](void* host, int64_t first, int64_t count) {
      int64_t overflows = 0;
      for (int64_t done = 0; done < count;) {
        const int64_t run = slot.contiguous_run(first + done, count - done);
        overflows += convert_elements_parallel(
            tensor.data + slot.source_index(first + done) * source_size, tensor.dtype,
            static_cast<std::byte*>(host) + done * target_size, dtype, run);
        done += run;
      }
      if (overflows > 0) {
        throw Error(fmt::format("{}: tensor '{}' has {} value(s) outside the {} range",
                                tensor.file.string(), tensor.name, overflows, dtype_name(dtype)));
      }
    });
  }
}

}  // namespace

int64_t WeightSlot::source_index(int64_t index) const {
  if (shard.dim < 0) return index;
  int64_t row_elements = 1;  // of the checkpoint tensor
  for (size_t d = 1; d < shape.size(); ++d) row_elements *= shape[d];
  if (shard.dim == 0) return shard.start * row_elements + index;
  return index / shard.length * row_elements + shard.start + index % shard.length;
}

int64_t WeightSlot::contiguous_run(int64_t index, int64_t count) const {
  if (shard.dim != 1) return count;
  return std::min(count, shard.length - index % shard.length);
}

WeightSource WeightSource::open(const std::filesystem::path& model_dir, LoadFormat format) {
  WeightSource source;
  if (format == LoadFormat::kSafetensors)
    source.checkpoint_ = SafetensorsCheckpoint::open(model_dir);
  return source;
}

void WeightSource::fill(const WeightLayout& layout, Backend& backend) const {
  const auto start = std::chrono::steady_clock::now();
  if (checkpoint_) {
    load_checkpoint(*checkpoint_, layout, backend);
  } else {
    fill_dummy_weights(layout.slots, backend);
  }
  size_t bytes = 0;
  for (const WeightSlot& slot : layout.slots) bytes += slot.destination.nbytes();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  NVLLM_LOG_INFO("{} weights: {} tensors, {:.1f} MiB in {} on {}, {:.2f} s",
                 checkpoint_ ? "loaded" : "dummy", layout.slots.size(), bytes / 1048576.0,
                 dtype_name(backend.compute_dtype()), device_name(backend.device()), seconds);
}

}  // namespace nanovllm
