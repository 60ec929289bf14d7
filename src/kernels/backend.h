// The op interface the model is written against. The CPU backend computes in fp32; a CUDA
// backend implements the same ops. Every op takes views; none allocates.
#pragma once

#include <memory>

#include "core/buffer.h"
#include "core/tensor.h"

namespace nanovllm {

// Head layout of the packed qkv projection output: row t is [q heads | k heads | v heads].
struct AttentionDims {
  int num_heads = 0;     // query heads
  int num_kv_heads = 0;  // key/value heads (GQA when fewer than num_heads)
  int head_dim = 0;

  int q_size() const { return num_heads * head_dim; }
  int kv_size() const { return num_kv_heads * head_dim; }
  int qkv_size() const { return q_size() + 2 * kv_size(); }
};

// Where each sequence of a batch sits in the token rows and in the paged KV cache.
// The same metadata drives prefill (many query tokens, causal over cached prefix + new tokens)
// and decode (one query token per sequence). All tensors are int32 on the backend's device.
struct AttentionMetadata {
  int num_seqs = 0;
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  Tensor cu_seqlens_q;  // [num_seqs + 1] query rows of sequence i: [cu[i], cu[i+1])
  Tensor context_lens;  // [num_seqs] tokens in the cache for sequence i once this step's KV is
                        // stored; its query rows hold positions [context_len - q_len, context_len)
  Tensor block_tables;  // [num_seqs, max_blocks_per_seq] block ids, -1 past the end
  Tensor slot_mapping;  // [num_tokens] cache slot (block * block_size + offset) per row, -1 = skip
};

// One layer's paged cache: [num_blocks, block_size, num_kv_heads, head_dim] each.
struct LayerKVCache {
  Tensor k;
  Tensor v;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  // The dtype weights, activations and the KV cache are kept in.
  virtual DType compute_dtype() const = 0;

  // Copies between host memory and this backend's device (same byte count).
  virtual void upload(Tensor dst, const void* host_src) = 0;
  virtual void download(void* host_dst, const Tensor& src) = 0;
  virtual void synchronize() = 0;

  // out[t, :] = weight[ids[t], :].  ids int32 [T]; weight [V, H]; out [T, H]
  virtual void embedding(const Tensor& ids, const Tensor& weight, Tensor out) = 0;

  // out = x * rsqrt(mean(x^2) + eps) * weight over the last dim.  x, out [R, H]; weight [H]
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out) = 0;

  // residual = x + residual; x = rms_norm(residual) * weight, both in place.  x, residual [R, H]
  virtual void add_rms_norm(Tensor x, Tensor residual, const Tensor& weight, float eps) = 0;

  // out = x @ weight^T.  x [M, K]; weight [N, K]; out [M, N]
  virtual void linear(const Tensor& x, const Tensor& weight, Tensor out) = 0;

  // In place on the q and k heads of qkv [T, dims.qkv_size()]: per-head RMSNorm with
  // q_norm / k_norm [head_dim], then neox-style rotary embedding at positions int32 [T] using
  // cos_sin [max_positions, head_dim] (cos in the first half of a row, sin in the second).
  virtual void qk_norm_rope(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm,
                            const Tensor& positions, const Tensor& cos_sin, float eps,
                            const AttentionDims& dims) = 0;

  // Writes the k and v heads of qkv [T, dims.qkv_size()] to cache slots metadata.slot_mapping.
  virtual void store_kv(const Tensor& qkv, const LayerKVCache& cache,
                        const AttentionMetadata& metadata, const AttentionDims& dims) = 0;

  // Attention of the q heads of qkv [T, dims.qkv_size()] over the cached keys/values (which
  // already include this step's tokens), causal by position.  out [T, dims.q_size()]
  virtual void attention(const Tensor& qkv, const LayerKVCache& cache,
                         const AttentionMetadata& metadata, const AttentionDims& dims, float scale,
                         Tensor out) = 0;

  // out = silu(gate) * up where gate_up = [gate | up].  gate_up [T, 2I]; out [T, I]
  virtual void silu_mul(const Tensor& gate_up, Tensor out) = 0;

  // out[i, :] = x[indices[i], :].  x [T, H]; indices int32 [B]; out [B, H]
  virtual void gather_rows(const Tensor& x, const Tensor& indices, Tensor out) = 0;
};

// fp32 ops on a pool of num_threads threads (0: one per hardware thread). Like every backend,
// it expects its ops to be called from one thread at a time.
std::unique_ptr<Backend> make_cpu_backend(int num_threads = 0);

}  // namespace nanovllm
