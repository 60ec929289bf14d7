#include "model/qwen3/qwen3_weights.h"

#include <fmt/format.h>

#include "core/check.h"
#include "model/weight_conversion.h"

namespace nanovllm {
namespace {

class Allocator {
 public:
  Allocator(Backend& backend, Qwen3Weights& weights)
      : backend_(backend), weights_(weights), dtype_(backend.compute_dtype()) {}

  Tensor make(std::initializer_list<int64_t> shape) {
    size_t count = 1;
    for (int64_t extent : shape) count *= static_cast<size_t>(extent);
    weights_.storage.emplace_back(count * dtype_size(dtype_), backend_.device());
    return weights_.storage.back().as_tensor(dtype_, shape);
  }

 private:
  Backend& backend_;
  Qwen3Weights& weights_;
  DType dtype_;
};

}  // namespace

Qwen3Weights allocate_qwen3_weights(const ModelConfig& config, Backend& backend) {
  NVLLM_CHECK_MSG(is_floating(backend.compute_dtype()), "weights cannot be kept in {}",
                  dtype_name(backend.compute_dtype()));
  const int64_t hidden = config.hidden_size;
  const int64_t q_rows = int64_t{config.num_attention_heads} * config.head_dim;
  const int64_t kv_rows = int64_t{config.num_key_value_heads} * config.head_dim;
  const int64_t intermediate = config.intermediate_size;

  Qwen3Weights weights;
  weights.storage.reserve(3 + 8 * static_cast<size_t>(config.num_hidden_layers));
  Allocator allocate(backend, weights);
  weights.embed_tokens = allocate.make({config.vocab_size, hidden});
  weights.layers.resize(config.num_hidden_layers);
  for (Qwen3LayerWeights& layer : weights.layers) {
    layer.input_layernorm = allocate.make({hidden});
    layer.qkv_proj = allocate.make({q_rows + 2 * kv_rows, hidden});
    layer.q_norm = allocate.make({config.head_dim});
    layer.k_norm = allocate.make({config.head_dim});
    layer.o_proj = allocate.make({hidden, q_rows});
    layer.post_attention_layernorm = allocate.make({hidden});
    layer.gate_up_proj = allocate.make({2 * intermediate, hidden});
    layer.down_proj = allocate.make({hidden, intermediate});
  }
  weights.norm = allocate.make({hidden});
  weights.lm_head = config.tie_word_embeddings ? weights.embed_tokens
                                               : allocate.make({config.vocab_size, hidden});
  return weights;
}

WeightLayout qwen3_weight_layout(const ModelConfig& config, const Qwen3Weights& weights) {
  const int64_t head_dim = config.head_dim;
  const int64_t q_rows = config.num_attention_heads * head_dim;
  const int64_t kv_rows = config.num_key_value_heads * head_dim;
  const int64_t intermediate = config.intermediate_size;

  WeightLayout layout;
  layout.summary = fmt::format("{} layers, tie_word_embeddings={}", config.num_hidden_layers,
                               config.tie_word_embeddings);
  std::vector<WeightSlot>& slots = layout.slots;
  auto add = [&](std::string name, Tensor destination, bool is_norm_gain = false) {
    std::vector<int64_t> shape;
    for (int d = 0; d < destination.ndim(); ++d) shape.push_back(destination.size(d));
    slots.push_back({std::move(name), std::move(shape), destination, is_norm_gain});
  };

  add("model.embed_tokens.weight", weights.embed_tokens);
  for (int i = 0; i < config.num_hidden_layers; ++i) {
    const Qwen3LayerWeights& layer = weights.layers[i];
    const std::string prefix = fmt::format("model.layers.{}.", i);
    add(prefix + "input_layernorm.weight", layer.input_layernorm, true);
    add(prefix + "self_attn.q_proj.weight", layer.qkv_proj.slice_rows(0, q_rows));
    add(prefix + "self_attn.k_proj.weight", layer.qkv_proj.slice_rows(q_rows, q_rows + kv_rows));
    add(prefix + "self_attn.v_proj.weight",
        layer.qkv_proj.slice_rows(q_rows + kv_rows, q_rows + 2 * kv_rows));
    add(prefix + "self_attn.q_norm.weight", layer.q_norm, true);
    add(prefix + "self_attn.k_norm.weight", layer.k_norm, true);
    add(prefix + "self_attn.o_proj.weight", layer.o_proj);
    add(prefix + "post_attention_layernorm.weight", layer.post_attention_layernorm, true);
    add(prefix + "mlp.gate_proj.weight", layer.gate_up_proj.slice_rows(0, intermediate));
    add(prefix + "mlp.up_proj.weight",
        layer.gate_up_proj.slice_rows(intermediate, 2 * intermediate));
    add(prefix + "mlp.down_proj.weight", layer.down_proj);
  }
  add("model.norm.weight", weights.norm, true);
  if (config.tie_word_embeddings) {
    // Some tied checkpoints ship the (identical) head anyway; the embedding is what is used.
    layout.unused.push_back("lm_head.weight");
  } else {
    add("lm_head.weight", weights.lm_head);
  }
  return layout;
}

Qwen3Weights load_qwen3_weights(const ModelConfig& config, const WeightSource& source,
                                Backend& backend) {
  Qwen3Weights weights = allocate_qwen3_weights(config, backend);
  source.fill(qwen3_weight_layout(config, weights), backend);
  return weights;
}

Qwen3Weights load_qwen3_weights(const std::filesystem::path& model_dir, const ModelConfig& config,
                                Backend& backend, LoadFormat format) {
  const WeightSource source = WeightSource::open(model_dir, format);
  return load_qwen3_weights(config, source, backend);
}

}  // namespace nanovllm
