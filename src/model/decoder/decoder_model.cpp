// Qwen3, Qwen3-MoE, Qwen2 and Llama as Hugging Face transformers (and nano-vllm, for Qwen3)
// compute them, over the Backend ops:
//   h = embed(ids); per layer: pre-norm attention (q/k/v biases for Qwen2, q/k RMSNorm for
//   Qwen3, RoPE, paged causal attention) and a SwiGLU MLP (in a sparse layer of Qwen3-MoE, the
//   router's top experts' SwiGLU MLPs, weighted), each added into the residual stream; final
//   norm; LM head on the rows whose logits are wanted. The residual add is fused into the
//   following RMSNorm, and on one rank a sparse layer's add and next norm into the experts'
//   last step (Backend::moe_experts_add_rms_norm).
//
// A decode step of one sequence runs through the backend's one-row kernels where it has them
// (Backend::one_row_kernels): each norm rides in the linear after it and each residual add (and
// the SiLU) in the linear before it, 5 kernels a layer instead of 8, or 4 with the MLP in one.
// The values are the same save for the order of the norms' sums. forward() picks the path.
//
// Over a tensor-parallel group each rank holds its share of the heads, of the MLP's columns and
// of the vocabulary (decoder_weights.h): the embedding lookup, o_proj and down_proj give partial
// sums that an all-reduce completes, and the LM head's columns are gathered, so every rank has
// all the logits and samples the same tokens.
//
// Dumped names (NANOVLLM_DUMP_DIR), with T tokens, H hidden, B logit rows:
//   input_ids, positions [T] (int32); embed [T, H]
//   layer{i}.input_norm [T, H]; layer{i}.qkv [T, (heads + 2 kv_heads) * head_dim] (projection,
//   with its bias if any); layer{i}.qk_rope (same, after any q/k norm and rotary);
//   layer{i}.attn [T, heads * head_dim]; layer{i}.attn_out [T, H] (o_proj);
//   layer{i}.post_attention_norm [T, H];
//   layer{i}.gate_up [T, 2 I]; layer{i}.mlp_act [T, I] (dense layers);
//   layer{i}.router_logits [T, experts]; layer{i}.expert_ids (int32), layer{i}.expert_weights
//   [T, experts_per_token] (sparse layers); layer{i}.mlp_out [T, H] (the MLP's output);
//   layer{i}.output [T, H]: the residual stream after layer i (HF's hidden_states[i + 1]);
//   final_norm [T, H]; last_hidden [B, H]; logits [B, vocab].
#include "model/decoder/decoder_model.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "model/rotary.h"
#include "model/tensor_dump.h"

namespace nanovllm {

struct DecoderModel::Workspace {
  explicit Workspace(Backend& backend) : dumper(backend) {}

  OwnedTensor cos_sin;  // [max_position_embeddings, head_dim]
  int64_t token_capacity = 0;
  int64_t logit_row_capacity = 0;
  Buffer residual;        // [T, H]
  Buffer hidden;          // [T, H]
  Buffer qkv;             // [T, qkv_size]
  Buffer attn;            // [T, q_size]
  Buffer gate_up;         // [T, 2 I]
  Buffer act;             // [T, I]
  Buffer router_logits;   // [T, experts]
  Buffer expert_ids;      // i32 [T, experts_per_token]
  Buffer expert_weights;  // f32 [T, experts_per_token]
  Buffer last_hidden;     // [B, H]
  Buffer logits;          // [B, vocab]
  Buffer shard_logits;    // [B, this rank's vocab], over several ranks
  OwnedTensor pending;    // i64 [1, H], zeros between steps; where the backend fuses the MLP
  TensorDumper dumper;
};

// One forward's views of the workspace.
struct DecoderModel::Activations {
  int64_t tokens = 0;     // T
  int64_t rows = 0;       // B
  Tensor residual;        // [T, H]
  Tensor h;               // [T, H]
  Tensor qkv;             // [T, (nq + 2 nkv) D]
  Tensor attn;            // [T, nq D]
  Tensor gate_up;         // [T, 2 I]
  Tensor act;             // [T, I]
  Tensor router_logits;   // [T, experts], in a model with experts
  Tensor expert_ids;      // i32 [T, experts_per_token]
  Tensor expert_weights;  // f32 [T, experts_per_token]
  Tensor last_hidden;     // [B, H]
  Tensor logits;          // f32 [B, V]
  Tensor shard_logits;    // f32 [B, V / ranks], over several ranks
};

namespace {

void check_weight(const Tensor& weight, std::string_view name, DType dtype, Device device,
                  std::initializer_list<int64_t> shape) {
  NVLLM_CHECK_MSG(weight.defined(), "weight {} is missing", name);
  NVLLM_CHECK_MSG(weight.dtype() == dtype && weight.device() == device,
                  "weight {} is {} on {}, expected {} on {}", name, weight.shape_string(),
                  device_name(weight.device()), dtype_name(dtype), device_name(device));
  bool same = weight.ndim() == static_cast<int>(shape.size());
  int dim = 0;
  for (int64_t extent : shape) same = same && weight.size(dim++) == extent;
  NVLLM_CHECK_MSG(same, "weight {} is {}, expected [{}]", name, weight.shape_string(),
                  fmt::join(shape, ", "));
}

// Grows `buffer` to hold `bytes` on `device`; the old contents are not kept.
void reserve_buffer(Buffer& buffer, size_t bytes, Device device) {
  if (buffer.bytes() < bytes) buffer = Buffer(bytes, device);
}

}  // namespace

DecoderModel::DecoderModel(const ModelConfig& config, DecoderWeights weights, Backend& backend,
                           TensorParallel tp)
    : config_(config),
      shard_(DecoderShard::of(config, tp)),
      weights_(std::move(weights)),
      backend_(backend) {
  const ModelConfig& c = config_;
  NVLLM_CHECK_GE(c.num_hidden_layers, 1);
  NVLLM_CHECK_MSG(c.num_attention_heads > 0 && c.num_key_value_heads > 0 &&
                      c.num_attention_heads % c.num_key_value_heads == 0,
                  "{} attention heads do not split into groups over {} kv heads",
                  c.num_attention_heads, c.num_key_value_heads);
  const DType dtype = backend.compute_dtype();
  const Device device = backend.device();
  const int64_t hidden = c.hidden_size;
  const AttentionDims dims = attention_dims();
  check_weight(weights_.embed_tokens, "embed_tokens", dtype, device, {shard_.vocab, hidden});
  check_weight(weights_.norm, "norm", dtype, device, {hidden});
  check_weight(weights_.lm_head, "lm_head", dtype, device, {shard_.vocab, hidden});
  NVLLM_CHECK_EQ(weights_.layers.size(), static_cast<size_t>(c.num_hidden_layers));
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const DecoderLayerWeights& w = weights_.layers[i];
    auto check = [&](const Tensor& t, std::string_view name, std::initializer_list<int64_t> shape) {
      check_weight(t, fmt::format("layers.{}.{}", i, name), dtype, device, shape);
    };
    check(w.input_layernorm, "input_layernorm", {hidden});
    check(w.qkv_proj, "qkv_proj", {dims.qkv_size(), hidden});
    if (c.qk_norm) {
      check(w.q_norm, "q_norm", {dims.head_dim});
      check(w.k_norm, "k_norm", {dims.head_dim});
    }
    NVLLM_CHECK_MSG(w.q_norm.defined() == c.qk_norm && w.k_norm.defined() == c.qk_norm,
                    "layers.{}: q/k norm weights {} for a model {} q/k norm", i,
                    w.q_norm.defined() ? "given" : "missing", c.qk_norm ? "with" : "without");
    if (c.qkv_bias) check(w.qkv_bias, "qkv_bias", {dims.qkv_size()});
    NVLLM_CHECK_MSG(w.qkv_bias.defined() == c.qkv_bias,
                    "layers.{}: qkv bias {} for a model {} biases", i,
                    w.qkv_bias.defined() ? "given" : "missing", c.qkv_bias ? "with" : "without");
    check(w.o_proj, "o_proj", {hidden, dims.q_size()});
    check(w.post_attention_layernorm, "post_attention_layernorm", {hidden});
    if (c.moe.is_sparse(i)) {
      const int64_t experts = c.moe.experts;
      const int64_t width = shard_.expert_intermediate;
      check(w.router, "router", {experts, hidden});
      check(w.expert_gate_up, "expert_gate_up", {experts, 2 * width, hidden});
      check(w.expert_down, "expert_down", {experts, hidden, width});
    } else {
      check(w.gate_up_proj, "gate_up_proj", {2 * int64_t{shard_.intermediate}, hidden});
      check(w.down_proj, "down_proj", {hidden, shard_.intermediate});
    }
  }

  for (int i = 0; i < c.num_hidden_layers; ++i) dense_mlp_ = dense_mlp_ || !c.moe.is_sparse(i);
  workspace_ = std::make_shared<Workspace>(backend);
  const std::vector<float> table =
      rotary_cos_sin_table(c.max_position_embeddings, dims.head_dim, c.rope_theta, c.rope_scaling);
  workspace_->cos_sin =
      OwnedTensor(DType::kF32, {c.max_position_embeddings, dims.head_dim}, device);
  backend.upload(workspace_->cos_sin.tensor, table.data());
  // The one-row kernels add o_proj and down_proj into the residual stream themselves, which
  // over several ranks must wait for the all-reduce. They serve the dense MLP only.
  if (tp.size == 1 && !c.moe.enabled()) {
    const int64_t normed_features =
        std::min<int64_t>({dims.qkv_size(), 2 * int64_t{c.intermediate_size}, c.vocab_size});
    one_row_ = backend.one_row_kernels(hidden, c.intermediate_size, normed_features);
  }
  if (one_row_.mlp) {
    workspace_->pending = OwnedTensor(DType::kI64, {1, hidden}, device);
    const std::vector<int64_t> zeros(hidden, 0);
    backend.upload(workspace_->pending.tensor, zeros.data());
  }
}

AttentionDims DecoderModel::attention_dims() const {
  return {shard_.heads, shard_.kv_heads, config_.head_dim};
}

bool DecoderModel::dumps_tensors() const {
  return workspace_->dumper.enabled();
}

void DecoderModel::reserve(int64_t tokens, int64_t logit_rows) {
  const ModelConfig& c = config_;
  const AttentionDims dims = attention_dims();
  const int64_t hidden = c.hidden_size;
  const int64_t inter = shard_.intermediate;
  const size_t elem = dtype_size(backend_.compute_dtype());
  const Device device = backend_.device();
  Workspace& ws = *workspace_;
  if (tokens > ws.token_capacity) {
    reserve_buffer(ws.residual, tokens * hidden * elem, device);
    reserve_buffer(ws.hidden, tokens * hidden * elem, device);
    reserve_buffer(ws.qkv, tokens * dims.qkv_size() * elem, device);
    reserve_buffer(ws.attn, tokens * dims.q_size() * elem, device);
    if (dense_mlp_) {
      reserve_buffer(ws.gate_up, tokens * 2 * inter * elem, device);
      reserve_buffer(ws.act, tokens * inter * elem, device);
    }
    if (c.moe.enabled()) {
      const int64_t chosen = tokens * c.moe.experts_per_token;
      reserve_buffer(ws.router_logits, tokens * c.moe.experts * elem, device);
      reserve_buffer(ws.expert_ids, chosen * sizeof(int32_t), device);
      reserve_buffer(ws.expert_weights, chosen * sizeof(float), device);
    }
    ws.token_capacity = tokens;
  }
  if (logit_rows > ws.logit_row_capacity) {
    reserve_buffer(ws.last_hidden, logit_rows * hidden * elem, device);
    reserve_buffer(ws.logits, logit_rows * c.vocab_size * sizeof(float), device);
    if (shard_.tp.size > 1) {
      reserve_buffer(ws.shard_logits, logit_rows * shard_.vocab * sizeof(float), device);
    }
    ws.logit_row_capacity = logit_rows;
  }
}

Tensor DecoderModel::forward(const ForwardBatch& batch, const std::vector<LayerKVCache>& kv_cache) {
  const ModelConfig& c = config_;
  NVLLM_CHECK_EQ(kv_cache.size(), static_cast<size_t>(c.num_hidden_layers));
  NVLLM_CHECK_EQ(batch.input_ids.ndim(), 1);
  NVLLM_CHECK_EQ(batch.last_token_indices.ndim(), 1);
  const int64_t tokens = batch.input_ids.size(0);
  const int64_t rows = batch.last_token_indices.size(0);
  NVLLM_CHECK_GT(tokens, 0);
  const int64_t hidden = c.hidden_size;
  const int64_t inter = shard_.intermediate;
  const AttentionDims dims = attention_dims();
  const DType dtype = backend_.compute_dtype();

  reserve(tokens, rows);
  Workspace& ws = *workspace_;
  Activations a;
  a.tokens = tokens;
  a.rows = rows;
  a.residual = ws.residual.as_tensor(dtype, {tokens, hidden});
  a.h = ws.hidden.as_tensor(dtype, {tokens, hidden});
  a.qkv = ws.qkv.as_tensor(dtype, {tokens, dims.qkv_size()});
  a.attn = ws.attn.as_tensor(dtype, {tokens, dims.q_size()});
  if (dense_mlp_) {
    a.gate_up = ws.gate_up.as_tensor(dtype, {tokens, 2 * inter});
    a.act = ws.act.as_tensor(dtype, {tokens, inter});
  }
  if (c.moe.enabled()) {
    const int64_t chosen = c.moe.experts_per_token;
    a.router_logits = ws.router_logits.as_tensor(dtype, {tokens, c.moe.experts});
    a.expert_ids = ws.expert_ids.as_tensor(DType::kI32, {tokens, chosen});
    a.expert_weights = ws.expert_weights.as_tensor(DType::kF32, {tokens, chosen});
  }
  a.last_hidden = ws.last_hidden.as_tensor(dtype, {rows, hidden});
  a.logits = ws.logits.as_tensor(DType::kF32, {rows, c.vocab_size});
  if (shard_.tp.size > 1)
    a.shard_logits = ws.shard_logits.as_tensor(DType::kF32, {rows, shard_.vocab});

  TensorDumper& dumper = ws.dumper;
  dumper.dump("input_ids", batch.input_ids);
  dumper.dump("positions", batch.positions);
  // The residual stream starts as the embeddings; layer 0's input norm reads it directly.
  // Each rank looks up the ids of its rows of the vocabulary; the others' are zeros.
  backend_.embedding(batch.input_ids, weights_.embed_tokens, shard_.first_id, a.residual);
  if (shard_.tp.size > 1) backend_.all_reduce_sum(a.residual);  // [T, H]
  dumper.dump("embed", a.residual);
  // The one-row path does not keep the intermediates that a dump shows.
  if (tokens == 1 && one_row_.linears && !dumper.enabled()) {
    return forward_one_row(batch, kv_cache, a);
  }
  return forward_rows(batch, kv_cache, a);
}

void DecoderModel::attend(int layer, const ForwardBatch& batch, const LayerKVCache& cache,
                          const Activations& a) {
  const DecoderLayerWeights& w = weights_.layers[layer];
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const AttentionDims dims = attention_dims();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dims.head_dim)));
  const Tensor& cos_sin = workspace_->cos_sin.tensor;
  TensorDumper& dumper = workspace_->dumper;
  if (dumper.enabled()) {  // the normalized q and k, which the fused op may not write back
    backend_.qk_norm_rope_store_kv(a.qkv, w.q_norm, w.k_norm, batch.positions, cos_sin, eps, dims,
                                   cache, batch.attention);
    dumper.dump(fmt::format("layer{}.qk_rope", layer), a.qkv);
    backend_.attention(a.qkv, cache, batch.attention, dims, scale, a.attn);
    dumper.dump(fmt::format("layer{}.attn", layer), a.attn);
    return;
  }
  backend_.qk_norm_rope_attention(a.qkv, w.q_norm, w.k_norm, batch.positions, cos_sin, eps, dims,
                                  cache, batch.attention, scale, a.attn);
}

Tensor DecoderModel::forward_one_row(const ForwardBatch& batch,
                                     const std::vector<LayerKVCache>& kv_cache,
                                     const Activations& a) {
  const float eps = static_cast<float>(config_.rms_norm_eps);
  // With the MLP in one kernel, its output stays pending until the next linear folds it into
  // the residual stream. Only the residual stream is kept between kernels.
  const Tensor pending = one_row_.mlp ? workspace_->pending.tensor : Tensor();  // [1, H] or none
  for (int i = 0; i < config_.num_hidden_layers; ++i) {
    const DecoderLayerWeights& w = weights_.layers[i];
    backend_.rms_norm_linear(a.residual, w.input_layernorm, eps, w.qkv_proj, a.qkv, pending,
                             w.qkv_bias);
    attend(i, batch, kv_cache[i], a);
    backend_.linear_add(a.attn, w.o_proj, a.residual, pending);
    if (one_row_.mlp) {
      backend_.rms_norm_mlp(a.residual, w.post_attention_layernorm, eps, w.gate_up_proj,
                            w.down_proj, pending);
      continue;
    }
    backend_.rms_norm_linear(a.residual, w.post_attention_layernorm, eps, w.gate_up_proj,
                             a.gate_up);
    backend_.silu_linear_add(a.gate_up, w.down_proj, a.residual);
  }
  if (one_row_.mlp) backend_.fold_pending(a.residual, pending);
  // The final norm rides in the LM head.
  const Tensor sampled = a.rows == a.tokens ? a.residual : a.last_hidden;  // [B, H]
  if (a.rows != a.tokens) backend_.gather_rows(a.residual, batch.last_token_indices, a.last_hidden);
  backend_.rms_norm_linear(sampled, weights_.norm, eps, weights_.lm_head, a.logits);  // [B, V]
  return a.logits;
}

Tensor DecoderModel::forward_rows(const ForwardBatch& batch,
                                  const std::vector<LayerKVCache>& kv_cache, const Activations& a) {
  const float eps = static_cast<float>(config_.rms_norm_eps);
  TensorDumper& dumper = workspace_->dumper;
  auto dump_layer = [&](int layer, std::string_view what, const Tensor& t) {
    if (dumper.enabled()) dumper.dump(fmt::format("layer{}.{}", layer, what), t);
  };
  const int layers = config_.num_hidden_layers;
  bool normed = false;  // whether the last layer's experts left the next norm in a.h
  for (int i = 0; i < layers; ++i) {
    const DecoderLayerWeights& w = weights_.layers[i];
    if (i == 0) {
      backend_.rms_norm(a.residual, w.input_layernorm, eps, a.h);  // h [T, H]
    } else {
      // residual += h; h = norm, unless the experts before folded it in
      if (!normed) backend_.add_rms_norm(a.h, a.residual, w.input_layernorm, eps);
      dump_layer(i - 1, "output", a.residual);
    }
    dump_layer(i, "input_norm", a.h);

    if (w.qkv_bias.defined()) {  // [T, (nq + 2 nkv) D]
      backend_.linear_bias(a.h, w.qkv_proj, w.qkv_bias, a.qkv);
    } else {
      backend_.linear(a.h, w.qkv_proj, a.qkv);
    }
    dump_layer(i, "qkv", a.qkv);
    attend(i, batch, kv_cache[i], a);
    backend_.linear(a.attn, w.o_proj, a.h);  // [T, H]; over ranks, a partial sum
    if (shard_.tp.size > 1) backend_.all_reduce_sum(a.h);
    dump_layer(i, "attn_out", a.h);

    backend_.add_rms_norm(a.h, a.residual, w.post_attention_layernorm, eps);  // residual += attn
    dump_layer(i, "post_attention_norm", a.h);
    normed = false;
    if (config_.moe.is_sparse(i)) {
      const Tensor& next_norm =
          i + 1 < layers ? weights_.layers[i + 1].input_layernorm : weights_.norm;
      normed = experts(i, a, next_norm);  // [T, H]; over ranks, a partial sum
      if (normed) continue;
    } else {
      backend_.linear(a.h, w.gate_up_proj, a.gate_up);  // [T, 2 I]
      dump_layer(i, "gate_up", a.gate_up);
      backend_.silu_mul(a.gate_up, a.act);  // [T, I]
      dump_layer(i, "mlp_act", a.act);
      backend_.linear(a.act, w.down_proj, a.h);  // [T, H]; over ranks, a partial sum
    }
    if (shard_.tp.size > 1) backend_.all_reduce_sum(a.h);
    dump_layer(i, "mlp_out", a.h);
  }
  // residual += mlp; h = final norm, unless the experts before folded it in
  if (!normed) backend_.add_rms_norm(a.h, a.residual, weights_.norm, eps);
  dump_layer(layers - 1, "output", a.residual);
  dumper.dump("final_norm", a.h);

  // Row indices increase, so with as many rows as tokens (decode) the gather is the identity.
  const Tensor sampled_hidden = a.rows == a.tokens ? a.h : a.last_hidden;  // [B, H]
  if (a.rows != a.tokens) backend_.gather_rows(a.h, batch.last_token_indices, a.last_hidden);
  dumper.dump("last_hidden", sampled_hidden);
  if (shard_.tp.size > 1) {
    backend_.linear(sampled_hidden, weights_.lm_head, a.shard_logits);  // [B, V / ranks]
    backend_.all_gather_columns(a.shard_logits, a.logits);              // [B, V]
  } else {
    backend_.linear(sampled_hidden, weights_.lm_head, a.logits);  // [B, V]
  }
  dumper.dump("logits", a.logits);
  return a.logits;
}

bool DecoderModel::experts(int layer, const Activations& a, const Tensor& next_norm) {
  const DecoderLayerWeights& w = weights_.layers[layer];
  const MixtureOfExperts& moe = config_.moe;
  TensorDumper& dumper = workspace_->dumper;
  // Every rank routes the same rows with the whole router, so all pick the same experts.
  backend_.linear(a.h, w.router, a.router_logits);  // [T, experts]
  backend_.moe_route(a.router_logits, moe.experts_per_token, moe.normalize_weights,
                     a.expert_weights, a.expert_ids);
  const bool fold_norm = shard_.tp.size == 1 && !dumper.enabled();
  if (fold_norm) {
    backend_.moe_experts_add_rms_norm(a.h, a.expert_ids, a.expert_weights, w.expert_gate_up,
                                      w.expert_down, a.h, a.residual, next_norm,
                                      static_cast<float>(config_.rms_norm_eps));
  } else {
    backend_.moe_experts(a.h, a.expert_ids, a.expert_weights, w.expert_gate_up, w.expert_down, a.h);
  }
  if (dumper.enabled()) {
    dumper.dump(fmt::format("layer{}.router_logits", layer), a.router_logits);
    dumper.dump(fmt::format("layer{}.expert_ids", layer), a.expert_ids);
    dumper.dump(fmt::format("layer{}.expert_weights", layer), a.expert_weights);
  }
  return fold_norm;
}

void check_decoder_split(const ModelConfig& config, int ranks) {
  (void)DecoderShard::of(config, {0, ranks});
}

std::unique_ptr<CausalLM> load_decoder(const ModelConfig& config, const WeightSource& weights,
                                       Backend& backend, TensorParallel tp) {
  return std::make_unique<DecoderModel>(config, load_decoder_weights(config, weights, backend, tp),
                                        backend, tp);
}

}  // namespace nanovllm
