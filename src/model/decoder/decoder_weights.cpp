#include "model/decoder/decoder_weights.h"

#include <fmt/format.h>

#include "core/check.h"
#include "model/weight_conversion.h"

namespace nanovllm {
namespace {

// Expert `expert` of a stacked [experts, rows, columns] tensor: its [rows, columns] matrix.
Tensor expert_matrix(const Tensor& stacked, int64_t expert) {
  const int64_t rows = stacked.size(1);
  const int64_t columns = stacked.size(2);
  char* base = static_cast<char*>(stacked.data());
  return Tensor(base + expert * rows * columns * dtype_size(stacked.dtype()), stacked.dtype(),
                {rows, columns}, stacked.device());
}

class Allocator {
 public:
  Allocator(Backend& backend, DecoderWeights& weights)
      : backend_(backend), weights_(weights), dtype_(backend.compute_dtype()) {}

  Tensor make(std::initializer_list<int64_t> shape) {
    size_t count = 1;
    for (int64_t extent : shape) count *= static_cast<size_t>(extent);
    weights_.storage.emplace_back(count * dtype_size(dtype_), backend_.device());
    return weights_.storage.back().as_tensor(dtype_, shape);
  }

 private:
  Backend& backend_;
  DecoderWeights& weights_;
  DType dtype_;
};

}  // namespace

DecoderShard DecoderShard::of(const ModelConfig& config, TensorParallel tp) {
  NVLLM_CHECK_MSG(tp.size >= 1 && tp.rank >= 0 && tp.rank < tp.size, "rank {} of {} ranks", tp.rank,
                  tp.size);
  const auto refuse = [&](const std::string& what) {
    throw Error(fmt::format("tensor_parallel_size {}: {}", tp.size, what));
  };
  const int heads = config.num_attention_heads;
  const int kv_heads = config.num_key_value_heads;
  if (heads % tp.size != 0) {
    refuse(fmt::format("the {} attention heads do not split over {} ranks", heads, tp.size));
  }
  if (kv_heads % tp.size != 0 && tp.size % kv_heads != 0) {
    refuse(fmt::format("the {} key/value heads neither split over {} ranks nor divide them",
                       kv_heads, tp.size));
  }
  if (config.intermediate_size % tp.size != 0) {
    refuse(fmt::format("the MLP's {} columns do not split over {} ranks", config.intermediate_size,
                       tp.size));
  }
  if (config.moe.expert_intermediate % tp.size != 0) {
    refuse(fmt::format("each expert's {} MLP columns do not split over {} ranks",
                       config.moe.expert_intermediate, tp.size));
  }
  if (config.vocab_size % tp.size != 0) {
    refuse(fmt::format("the vocabulary of {} does not split over {} ranks", config.vocab_size,
                       tp.size));
  }
  DecoderShard shard;
  shard.tp = tp;
  shard.heads = heads / tp.size;
  if (kv_heads >= tp.size) {
    shard.kv_heads = kv_heads / tp.size;
    shard.first_kv_head = shard.kv_heads * tp.rank;
  } else {  // each KV head serves tp.size / kv_heads ranks
    shard.kv_heads = 1;
    shard.first_kv_head = tp.rank / (tp.size / kv_heads);
  }
  shard.intermediate = config.intermediate_size / tp.size;
  shard.expert_intermediate = config.moe.expert_intermediate / tp.size;
  shard.vocab = config.vocab_size / tp.size;
  shard.first_id = shard.vocab * tp.rank;
  return shard;
}

DecoderWeights allocate_decoder_weights(const ModelConfig& config, const DecoderShard& shard,
                                        Backend& backend) {
  NVLLM_CHECK_MSG(is_floating(backend.compute_dtype()), "weights cannot be kept in {}",
                  dtype_name(backend.compute_dtype()));
  const int64_t hidden = config.hidden_size;
  const int64_t q_rows = int64_t{shard.heads} * config.head_dim;
  const int64_t kv_rows = int64_t{shard.kv_heads} * config.head_dim;
  const int64_t intermediate = shard.intermediate;
  const int64_t experts = config.moe.experts;
  const int64_t expert_intermediate = shard.expert_intermediate;

  DecoderWeights weights;
  weights.storage.reserve(3 + 9 * static_cast<size_t>(config.num_hidden_layers));
  Allocator allocate(backend, weights);
  weights.embed_tokens = allocate.make({shard.vocab, hidden});
  weights.layers.resize(config.num_hidden_layers);
  for (int i = 0; i < config.num_hidden_layers; ++i) {
    DecoderLayerWeights& layer = weights.layers[i];
    layer.input_layernorm = allocate.make({hidden});
    layer.qkv_proj = allocate.make({q_rows + 2 * kv_rows, hidden});
    if (config.qkv_bias) layer.qkv_bias = allocate.make({q_rows + 2 * kv_rows});
    if (config.qk_norm) {
      layer.q_norm = allocate.make({config.head_dim});
      layer.k_norm = allocate.make({config.head_dim});
    }
    layer.o_proj = allocate.make({hidden, q_rows});
    layer.post_attention_layernorm = allocate.make({hidden});
    if (config.moe.is_sparse(i)) {
      layer.router = allocate.make({experts, hidden});
      layer.expert_gate_up = allocate.make({experts, 2 * expert_intermediate, hidden});
      layer.expert_down = allocate.make({experts, hidden, expert_intermediate});
    } else {
      layer.gate_up_proj = allocate.make({2 * intermediate, hidden});
      layer.down_proj = allocate.make({hidden, intermediate});
    }
  }
  weights.norm = allocate.make({hidden});
  weights.lm_head =
      config.tie_word_embeddings ? weights.embed_tokens : allocate.make({shard.vocab, hidden});
  return weights;
}

WeightLayout decoder_weight_layout(const ModelConfig& config, const DecoderShard& shard,
                                   const DecoderWeights& weights) {
  const int64_t head_dim = config.head_dim;
  const int64_t hidden = config.hidden_size;
  const int64_t q_rows = int64_t{shard.heads} * head_dim;
  const int64_t kv_rows = int64_t{shard.kv_heads} * head_dim;
  const int64_t intermediate = shard.intermediate;
  const int64_t rank = shard.tp.rank;
  // Whole tensors, and the rows or columns of a rank's shard.
  const WeightShard whole;
  const auto rows = [](int64_t start, int64_t length) { return WeightShard{0, start, length}; };
  const auto columns = [](int64_t start, int64_t length) { return WeightShard{1, start, length}; };

  WeightLayout layout;
  layout.summary = fmt::format(
      "{} layers, tie_word_embeddings={}, qk_norm={}, qkv_bias={}, "
      "experts={}",
      config.num_hidden_layers, config.tie_word_embeddings, config.qk_norm, config.qkv_bias,
      config.moe.experts);
  std::vector<WeightSlot>& slots = layout.slots;
  auto add = [&](std::string name, Tensor destination, std::vector<int64_t> shape, WeightShard part,
                 bool is_norm_gain = false) {
    slots.push_back({std::move(name), std::move(shape), destination, is_norm_gain, part});
  };
  const int64_t vocab = config.vocab_size;
  const int64_t all_q_rows = int64_t{config.num_attention_heads} * head_dim;
  const int64_t all_kv_rows = int64_t{config.num_key_value_heads} * head_dim;
  const int64_t all_intermediate = config.intermediate_size;
  const int64_t experts = config.moe.experts;
  const int64_t expert_intermediate = shard.expert_intermediate;
  const int64_t all_expert_intermediate = config.moe.expert_intermediate;

  add("model.embed_tokens.weight", weights.embed_tokens, {vocab, hidden},
      rows(shard.first_id, shard.vocab));
  for (int i = 0; i < config.num_hidden_layers; ++i) {
    const DecoderLayerWeights& layer = weights.layers[i];
    const std::string prefix = fmt::format("model.layers.{}.", i);
    const WeightShard kv_part = rows(shard.first_kv_head * head_dim, kv_rows);
    add(prefix + "input_layernorm.weight", layer.input_layernorm, {hidden}, whole, true);
    add(prefix + "self_attn.q_proj.weight", layer.qkv_proj.slice_rows(0, q_rows),
        {all_q_rows, hidden}, rows(rank * q_rows, q_rows));
    add(prefix + "self_attn.k_proj.weight", layer.qkv_proj.slice_rows(q_rows, q_rows + kv_rows),
        {all_kv_rows, hidden}, kv_part);
    add(prefix + "self_attn.v_proj.weight",
        layer.qkv_proj.slice_rows(q_rows + kv_rows, q_rows + 2 * kv_rows), {all_kv_rows, hidden},
        kv_part);
    if (config.qkv_bias) {
      add(prefix + "self_attn.q_proj.bias", layer.qkv_bias.slice_rows(0, q_rows), {all_q_rows},
          rows(rank * q_rows, q_rows));
      add(prefix + "self_attn.k_proj.bias", layer.qkv_bias.slice_rows(q_rows, q_rows + kv_rows),
          {all_kv_rows}, kv_part);
      add(prefix + "self_attn.v_proj.bias",
          layer.qkv_bias.slice_rows(q_rows + kv_rows, q_rows + 2 * kv_rows), {all_kv_rows},
          kv_part);
    }
    if (config.qk_norm) {
      add(prefix + "self_attn.q_norm.weight", layer.q_norm, {head_dim}, whole, true);
      add(prefix + "self_attn.k_norm.weight", layer.k_norm, {head_dim}, whole, true);
    }
    add(prefix + "self_attn.o_proj.weight", layer.o_proj, {hidden, all_q_rows},
        columns(rank * q_rows, q_rows));
    add(prefix + "post_attention_layernorm.weight", layer.post_attention_layernorm, {hidden}, whole,
        true);
    if (!config.moe.is_sparse(i)) {
      add(prefix + "mlp.gate_proj.weight", layer.gate_up_proj.slice_rows(0, intermediate),
          {all_intermediate, hidden}, rows(rank * intermediate, intermediate));
      add(prefix + "mlp.up_proj.weight",
          layer.gate_up_proj.slice_rows(intermediate, 2 * intermediate), {all_intermediate, hidden},
          rows(rank * intermediate, intermediate));
      add(prefix + "mlp.down_proj.weight", layer.down_proj, {hidden, all_intermediate},
          columns(rank * intermediate, intermediate));
      continue;
    }
    add(prefix + "mlp.gate.weight", layer.router, {experts, hidden}, whole);
    for (int64_t e = 0; e < experts; ++e) {
      const std::string expert = fmt::format("{}mlp.experts.{}.", prefix, e);
      const Tensor gate_up = expert_matrix(layer.expert_gate_up, e);
      add(expert + "gate_proj.weight", gate_up.slice_rows(0, expert_intermediate),
          {all_expert_intermediate, hidden}, rows(rank * expert_intermediate, expert_intermediate));
      add(expert + "up_proj.weight",
          gate_up.slice_rows(expert_intermediate, 2 * expert_intermediate),
          {all_expert_intermediate, hidden}, rows(rank * expert_intermediate, expert_intermediate));
      add(expert + "down_proj.weight", expert_matrix(layer.expert_down, e),
          {hidden, all_expert_intermediate},
          columns(rank * expert_intermediate, expert_intermediate));
    }
  }
  add("model.norm.weight", weights.norm, {hidden}, whole, true);
  if (config.tie_word_embeddings) {
    // Some tied checkpoints ship the (identical) head anyway; the embedding is what is used.
    layout.unused.push_back("lm_head.weight");
  } else {
    add("lm_head.weight", weights.lm_head, {vocab, hidden}, rows(shard.first_id, shard.vocab));
  }
  return layout;
}

DecoderWeights load_decoder_weights(const ModelConfig& config, const WeightSource& source,
                                    Backend& backend, TensorParallel tp) {
  const DecoderShard shard = DecoderShard::of(config, tp);
  DecoderWeights weights = allocate_decoder_weights(config, shard, backend);
  source.fill(decoder_weight_layout(config, shard, weights), backend);
  return weights;
}

DecoderWeights load_decoder_weights(const std::filesystem::path& model_dir,
                                    const ModelConfig& config, Backend& backend, LoadFormat format,
                                    TensorParallel tp) {
  const WeightSource source = WeightSource::open(model_dir, format);
  return load_decoder_weights(config, source, backend, tp);
}

}  // namespace nanovllm
