// Filling a model's weights on a backend from a checkpoint, or with random values: what every
// architecture shares. An architecture describes where each checkpoint tensor goes (its
// WeightLayout); this matches the checkpoint against it, checks every shape and dtype before
// copying anything, then converts and uploads tensor by tensor.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/safetensors.h"

namespace nanovllm {

enum class LoadFormat { kSafetensors, kDummy };

// What of a checkpoint tensor one rank of a tensor-parallel group holds.
struct WeightShard {
  int dim = -1;  // 0: `length` rows from `start`; 1: `length` columns (of a matrix); -1: all
  int64_t start = 0;
  int64_t length = 0;
};

struct WeightSlot {
  std::string name;            // checkpoint name, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // the shape the checkpoint must have
  Tensor destination;          // device view of the shard: a tensor, or rows of a merged one
  bool is_norm_gain = false;   // an RMSNorm weight (initialized to ones by the dummy loader)
  WeightShard shard;

  // The checkpoint element (row-major) that destination element `index` holds.
  int64_t source_index(int64_t index) const;
  // How many destination elements from `index` on, at most `count`, lie one after another in
  // the checkpoint too.
  int64_t contiguous_run(int64_t index, int64_t count) const;
};

struct WeightLayout {
  std::vector<WeightSlot> slots;
  // Checkpoint tensors that may be present and are not read (a tied checkpoint's lm_head).
  std::vector<std::string> unused;
  // What the layout follows from, for the error when the checkpoint does not match it
  // ("28 layers, tie_word_embeddings=true").
  std::string summary;
};

// Where weights come from: a checkpoint (model.safetensors or the shards of
// model.safetensors.index.json) or dummy values.
class WeightSource {
 public:
  // Opens the checkpoint (kSafetensors), so that a broken file is reported before any device
  // memory is taken. Throws Error naming the file and the problem.
  static WeightSource open(const std::filesystem::path& model_dir, LoadFormat format);

  // Fills every slot of `layout`; throws Error naming the file and the problem.
  void fill(const WeightLayout& layout, Backend& backend) const;

 private:
  std::optional<SafetensorsCheckpoint> checkpoint_;  // none: dummy values
};

}  // namespace nanovllm
