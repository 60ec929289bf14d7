// Qwen3 as Hugging Face transformers (and nano-vllm) compute it, over the Backend ops:
//   h = embed(ids); per layer: pre-norm attention (q/k RMSNorm, RoPE, paged causal attention)
//   and a SwiGLU MLP, each added into the residual stream; final norm; LM head on the rows
//   whose logits are wanted. The residual add is fused into the following RMSNorm.
//
// Dumped names (NANOVLLM_DUMP_DIR), with T tokens, H hidden, B logit rows:
//   input_ids, positions [T] (int32); embed [T, H]
//   layer{i}.input_norm [T, H]; layer{i}.qkv [T, (heads + 2 kv_heads) * head_dim] (projection);
//   layer{i}.qk_rope (same, after q/k norm and rotary); layer{i}.attn [T, heads * head_dim];
//   layer{i}.attn_out [T, H] (o_proj); layer{i}.post_attention_norm [T, H];
//   layer{i}.gate_up [T, 2 I]; layer{i}.mlp_act [T, I]; layer{i}.mlp_out [T, H] (down_proj);
//   layer{i}.output [T, H]: the residual stream after layer i (HF's hidden_states[i + 1]);
//   final_norm [T, H]; last_hidden [B, H]; logits [B, vocab].
#include "model/qwen3_model.h"

#include <fmt/ranges.h>

#include <cmath>

#include "model/tensor_dump.h"

namespace nanovllm {

struct Qwen3Model::Workspace {
  explicit Workspace(Backend& backend) : dumper(backend) {}

  OwnedTensor cos_sin;  // [max_position_embeddings, head_dim]
  int64_t token_capacity = 0;
  int64_t logit_row_capacity = 0;
  Buffer residual;      // [T, H]
  Buffer hidden;        // [T, H]
  Buffer qkv;           // [T, qkv_size]
  Buffer attn;          // [T, q_size]
  Buffer gate_up;       // [T, 2 I]
  Buffer act;           // [T, I]
  Buffer last_hidden;   // [B, H]
  Buffer logits;        // [B, vocab]
  OwnedTensor pending;  // i64 [1, H], zeros between steps; where the backend fuses the MLP
  TensorDumper dumper;
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

std::vector<float> rotary_cos_sin_table(int max_positions, int head_dim, double theta) {
  NVLLM_CHECK_GT(max_positions, 0);
  NVLLM_CHECK_MSG(head_dim > 0 && head_dim % 2 == 0, "head_dim {} must be positive and even",
                  head_dim);
  const int half = head_dim / 2;
  // HF: inv_freq = 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all float32; the float32
  // pow is evaluated in double and rounded once.
  const float base = static_cast<float>(theta);
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(base), exponent));
    inv_freq[i] = 1.0f / power;
  }
  // HF: freqs = position (float32) * inv_freq (float32), rounded to float32; cos/sin of that.
  std::vector<float> table(static_cast<size_t>(max_positions) * head_dim);
  for (int p = 0; p < max_positions; ++p) {
    float* row = table.data() + static_cast<size_t>(p) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      row[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      row[half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
  return table;
}

Qwen3Model::Qwen3Model(const ModelConfig& config, Qwen3Weights weights, Backend& backend)
    : config_(config), weights_(std::move(weights)), backend_(backend) {
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
  check_weight(weights_.embed_tokens, "embed_tokens", dtype, device, {c.vocab_size, hidden});
  check_weight(weights_.norm, "norm", dtype, device, {hidden});
  check_weight(weights_.lm_head, "lm_head", dtype, device, {c.vocab_size, hidden});
  NVLLM_CHECK_EQ(weights_.layers.size(), static_cast<size_t>(c.num_hidden_layers));
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const Qwen3LayerWeights& w = weights_.layers[i];
    auto check = [&](const Tensor& t, std::string_view name, std::initializer_list<int64_t> shape) {
      check_weight(t, fmt::format("layers.{}.{}", i, name), dtype, device, shape);
    };
    check(w.input_layernorm, "input_layernorm", {hidden});
    check(w.qkv_proj, "qkv_proj", {dims.qkv_size(), hidden});
    check(w.q_norm, "q_norm", {dims.head_dim});
    check(w.k_norm, "k_norm", {dims.head_dim});
    check(w.o_proj, "o_proj", {hidden, dims.q_size()});
    check(w.post_attention_layernorm, "post_attention_layernorm", {hidden});
    check(w.gate_up_proj, "gate_up_proj", {2 * int64_t{c.intermediate_size}, hidden});
    check(w.down_proj, "down_proj", {hidden, c.intermediate_size});
  }

  workspace_ = std::make_shared<Workspace>(backend);
  const std::vector<float> table =
      rotary_cos_sin_table(c.max_position_embeddings, dims.head_dim, c.rope_theta);
  workspace_->cos_sin =
      OwnedTensor(DType::kF32, {c.max_position_embeddings, dims.head_dim}, device);
  backend.upload(workspace_->cos_sin.tensor, table.data());
  if (backend.fuses_mlp(1, hidden, c.intermediate_size)) {
    workspace_->pending = OwnedTensor(DType::kI64, {1, hidden}, device);
    const std::vector<int64_t> zeros(hidden, 0);
    backend.upload(workspace_->pending.tensor, zeros.data());
  }
}

bool Qwen3Model::dumps_tensors() const {
  return workspace_->dumper.enabled();
}

AttentionDims Qwen3Model::attention_dims() const {
  return {config_.num_attention_heads, config_.num_key_value_heads, config_.head_dim};
}

void Qwen3Model::reserve(int64_t tokens, int64_t logit_rows) {
  const ModelConfig& c = config_;
  const AttentionDims dims = attention_dims();
  const int64_t hidden = c.hidden_size;
  const int64_t inter = c.intermediate_size;
  const size_t elem = dtype_size(backend_.compute_dtype());
  const Device device = backend_.device();
  Workspace& ws = *workspace_;
  if (tokens > ws.token_capacity) {
    reserve_buffer(ws.residual, tokens * hidden * elem, device);
    reserve_buffer(ws.hidden, tokens * hidden * elem, device);
    reserve_buffer(ws.qkv, tokens * dims.qkv_size() * elem, device);
    reserve_buffer(ws.attn, tokens * dims.q_size() * elem, device);
    reserve_buffer(ws.gate_up, tokens * 2 * inter * elem, device);
    reserve_buffer(ws.act, tokens * inter * elem, device);
    ws.token_capacity = tokens;
  }
  if (logit_rows > ws.logit_row_capacity) {
    reserve_buffer(ws.last_hidden, logit_rows * hidden * elem, device);
    reserve_buffer(ws.logits, logit_rows * c.vocab_size * sizeof(float), device);
    ws.logit_row_capacity = logit_rows;
  }
}

Tensor Qwen3Model::forward(const ForwardBatch& batch, const std::vector<LayerKVCache>& kv_cache) {
  const ModelConfig& c = config_;
  NVLLM_CHECK_EQ(kv_cache.size(), static_cast<size_t>(c.num_hidden_layers));
  NVLLM_CHECK_EQ(batch.input_ids.ndim(), 1);
  NVLLM_CHECK_EQ(batch.last_token_indices.ndim(), 1);
  const int64_t tokens = batch.input_ids.size(0);
  const int64_t rows = batch.last_token_indices.size(0);
  NVLLM_CHECK_GT(tokens, 0);
  const int64_t hidden = c.hidden_size;
  const int64_t inter = c.intermediate_size;
  const AttentionDims dims = attention_dims();
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dims.head_dim)));
  const DType dtype = backend_.compute_dtype();

  reserve(tokens, rows);
  Workspace& ws = *workspace_;
  Tensor residual = ws.residual.as_tensor(dtype, {tokens, hidden});        // [T, H]
  Tensor h = ws.hidden.as_tensor(dtype, {tokens, hidden});                 // [T, H]
  Tensor qkv = ws.qkv.as_tensor(dtype, {tokens, dims.qkv_size()});         // [T, (nq + 2 nkv) D]
  Tensor attn = ws.attn.as_tensor(dtype, {tokens, dims.q_size()});         // [T, nq D]
  Tensor gate_up = ws.gate_up.as_tensor(dtype, {tokens, 2 * inter});       // [T, 2 I]
  Tensor act = ws.act.as_tensor(dtype, {tokens, inter});                   // [T, I]
  Tensor last_hidden = ws.last_hidden.as_tensor(dtype, {rows, hidden});    // [B, H]
  Tensor logits = ws.logits.as_tensor(DType::kF32, {rows, c.vocab_size});  // [B, V]

  TensorDumper& dumper = ws.dumper;
  auto dump_layer = [&](int layer, std::string_view what, const Tensor& t) {
    if (dumper.enabled()) dumper.dump(fmt::format("layer{}.{}", layer, what), t);
  };
  dumper.dump("input_ids", batch.input_ids);
  dumper.dump("positions", batch.positions);

  // A decode batch may run every layer in one go (the backend says whether it does); it
  // leaves h and residual as the loop below would.
  const bool decode = batch.attention.max_seqlen_q == 1 && tokens == batch.attention.num_seqs;
  DecoderStack stack;
  stack.layers = weights_.layers;
  stack.kv_cache = kv_cache;
  stack.embed_tokens = weights_.embed_tokens;
  stack.cos_sin = ws.cos_sin.tensor;
  stack.dims = dims;
  stack.eps = eps;
  stack.scale = scale;
  const bool fused = decode && !dumper.enabled() &&
                     backend_.fused_decode_layers(stack, batch.input_ids, batch.positions,
                                                  batch.attention, h, residual);

  // The residual stream starts as the embeddings; layer 0's input norm reads it directly.
  if (!fused) backend_.embedding(batch.input_ids, weights_.embed_tokens, residual);  // [T, H]
  dumper.dump("embed", residual);

  // q/k norm, rotary, this step's K/V into the cache and attention: qkv -> attn [T, nq D].
  const auto attend = [&](int i, const Qwen3LayerWeights& w) {
    if (dumper.enabled()) {  // the normalized q and k, which the fused op may not write back
      backend_.qk_norm_rope_store_kv(qkv, w.q_norm, w.k_norm, batch.positions, ws.cos_sin.tensor,
                                     eps, dims, kv_cache[i], batch.attention);
      dump_layer(i, "qk_rope", qkv);
      backend_.attention(qkv, kv_cache[i], batch.attention, dims, scale, attn);
    } else {
      backend_.qk_norm_rope_attention(qkv, w.q_norm, w.k_norm, batch.positions, ws.cos_sin.tensor,
                                      eps, dims, kv_cache[i], batch.attention, scale, attn);
    }
    dump_layer(i, "attn", attn);
  };

  // Where the backend fuses them, each norm rides in the linear after it and each residual add
  // (and the SiLU) in the linear before it: 5 ops a layer instead of 8, the same values save
  // for the order of the norms' sums. Only the residual stream is kept between them.
  const bool fuse_linears =
      !fused && !dumper.enabled() && backend_.fuses_linear_neighbours(tokens, hidden, inter);
  // Where the backend also fuses the MLP, its output stays pending until the next linear
  // folds it into the residual stream: 4 ops a layer.
  const bool fuse_mlp =
      fuse_linears && ws.pending.tensor.defined() && backend_.fuses_mlp(tokens, hidden, inter);
  const Tensor pending = fuse_mlp ? ws.pending.tensor : Tensor();  // [1, H] or none
  for (int i = 0; i < (fuse_linears ? c.num_hidden_layers : 0); ++i) {
    const Qwen3LayerWeights& w = weights_.layers[i];
    backend_.rms_norm_linear(residual, w.input_layernorm, eps, w.qkv_proj, qkv, pending);
    attend(i, w);
    backend_.linear_add(attn, w.o_proj, residual, pending);
    if (fuse_mlp) {
      backend_.rms_norm_mlp(residual, w.post_attention_layernorm, eps, w.gate_up_proj, w.down_proj,
                            pending);
      continue;
    }
    backend_.rms_norm_linear(residual, w.post_attention_layernorm, eps, w.gate_up_proj, gate_up);
    backend_.silu_linear_add(gate_up, w.down_proj, residual);
  }
  if (fuse_mlp) backend_.fold_pending(residual, pending);

  for (int i = 0; i < (fused || fuse_linears ? 0 : c.num_hidden_layers); ++i) {
    const Qwen3LayerWeights& w = weights_.layers[i];
    if (i == 0) {
      backend_.rms_norm(residual, w.input_layernorm, eps, h);  // h [T, H]
    } else {
      backend_.add_rms_norm(h, residual, w.input_layernorm, eps);  // residual += h; h = norm
      dump_layer(i - 1, "output", residual);
    }
    dump_layer(i, "input_norm", h);

    backend_.linear(h, w.qkv_proj, qkv);  // [T, (nq + 2 nkv) D]
    dump_layer(i, "qkv", qkv);
    attend(i, w);
    backend_.linear(attn, w.o_proj, h);  // [T, H]
    dump_layer(i, "attn_out", h);

    backend_.add_rms_norm(h, residual, w.post_attention_layernorm, eps);  // residual += attn
    dump_layer(i, "post_attention_norm", h);
    backend_.linear(h, w.gate_up_proj, gate_up);  // [T, 2 I]
    dump_layer(i, "gate_up", gate_up);
    backend_.silu_mul(gate_up, act);  // [T, I]
    dump_layer(i, "mlp_act", act);
    backend_.linear(act, w.down_proj, h);  // [T, H]
    dump_layer(i, "mlp_out", h);
  }

  // Row indices increase, so with as many rows as tokens (decode) the gather is the identity.
  if (fuse_linears) {  // the final norm rides in the LM head
    const Tensor sampled = rows == tokens ? residual : last_hidden;  // [B, H]
    if (rows != tokens) backend_.gather_rows(residual, batch.last_token_indices, last_hidden);
    backend_.rms_norm_linear(sampled, weights_.norm, eps, weights_.lm_head, logits);  // [B, V]
    return logits;
  }
  backend_.add_rms_norm(h, residual, weights_.norm, eps);  // residual += mlp; h = final norm
  dump_layer(c.num_hidden_layers - 1, "output", residual);
  dumper.dump("final_norm", h);

  const Tensor sampled_hidden = rows == tokens ? h : last_hidden;  // [B, H]
  if (rows != tokens) backend_.gather_rows(h, batch.last_token_indices, last_hidden);
  dumper.dump("last_hidden", sampled_hidden);
  backend_.linear(sampled_hidden, weights_.lm_head, logits);  // [B, V]
  dumper.dump("logits", logits);
  return logits;
}

}  // namespace nanovllm
