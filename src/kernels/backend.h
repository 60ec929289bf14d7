// The op interface the model is written against. The CPU backend computes in fp32; the CUDA
// backend in fp32, bf16 or fp16 (fp32 accumulation). Every op takes views; ops allocate only
// backend-internal scratch, and only the first time a larger size is needed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/check.h"
#include "core/tensor.h"
#include "dist/communicator.h"

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
  // The longest context_lens entry, or a bound on it: a decode batch captured in a graph, which
  // is replayed for other contexts, gives the longest the engine admits.
  int max_seqlen_k = 0;
  Tensor cu_seqlens_q;  // [num_seqs + 1] query rows of sequence i: [cu[i], cu[i+1])
  Tensor context_lens;  // [num_seqs] tokens in the cache for sequence i once this step's KV is
                        // stored; its query rows hold positions [context_len - q_len, context_len)
  Tensor block_tables;  // [num_seqs, max_blocks_per_seq] block ids, -1 past the end
  Tensor slot_mapping;  // [num_tokens] cache slot (block * block_size + offset) per row, -1 = skip
  // Optional, decode: a permutation of [0, num_seqs), the order in which the sequences' work is
  // dispatched. Longest context first keeps the longest from starting last and running alone
  // at the end. Results do not depend on it.
  Tensor seq_order;
  // Optional: cu_seqlens_q and context_lens on the host, valid while the forward is enqueued,
  // for a backend that plans a prefill's work on the host (null: it reads them back).
  const int32_t* host_cu_seqlens_q = nullptr;
  const int32_t* host_context_lens = nullptr;
};

// One layer's paged cache: [num_blocks, block_size, num_kv_heads, head_dim] each.
struct LayerKVCache {
  Tensor k;
  Tensor v;
};

// Per-row sampling controls, device tensors of [B] rows (see kernels/sampling_math.h for the
// exact rule both backends follow).
struct SamplingTensors {
  Tensor temperature;  // f32 [B]; below SamplingParams::kGreedyTemperature = greedy
  Tensor top_k;        // i32 [B]; <= 0 = the whole vocabulary
  Tensor top_p;        // f32 [B]; in (0, 1], 1 = no nucleus truncation
  Tensor seed;         // i64 [B]; the request's seed (its 64 bits)
  Tensor position;     // i32 [B]; index in the sequence of the token being sampled
};

// Log-probabilities of the raw logits (log_softmax, no temperature or truncation).
struct LogprobsTensors {
  Tensor logprob;       // f32 [B]: of the sampled token
  Tensor rank;          // i32 [B]: 1 + number of tokens with a strictly larger logit
  Tensor top_ids;       // i32 [B, num_top]: most likely first, lowest id on ties
  Tensor top_logprobs;  // f32 [B, num_top]
};

// Device memory as the KV cache sizing needs it (nano-vllm's formula).
struct DeviceMemoryInfo {
  size_t total = 0;           // the device's memory
  size_t free = 0;            // free on the device now (all processes)
  size_t allocated = 0;       // held by this backend's allocations now
  size_t peak_allocated = 0;  // most held at once since the last reset_peak_memory()
};

// The fused one-row ops a backend serves (Backend::one_row_kernels).
struct OneRowKernels {
  bool linears = false;  // rms_norm_linear, linear_add and silu_linear_add
  bool mlp = false;      // rms_norm_mlp and fold_pending
};

// A recorded sequence of ops, re-run with the same pointers and launch sizes.
class CapturedGraph {
 public:
  virtual ~CapturedGraph() = default;
  virtual void replay() = 0;
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
  // Copies that may return before the device has made them, so that the host can go on while
  // the device works: until wait_for(the returned ticket) returns, an upload's source must
  // stay unchanged and a download's destination unread. They are truly asynchronous from
  // page-locked memory (pin_host_memory); the CPU backend makes them at once (ticket 0).
  virtual uint64_t upload_async(Tensor dst, const void* host_src) {
    upload(dst, host_src);
    return 0;
  }
  virtual uint64_t download_async(void* host_dst, const Tensor& src) {
    download(host_dst, src);
    return 0;
  }
  // Blocks until the copy behind `ticket`, and all work enqueued before it, is done.
  virtual void wait_for(uint64_t /*ticket*/) {}

  // Page-locks host memory that is copied every step, so that copies to and from it skip the
  // driver's staging buffer; the CPU backend has nothing to do. Unpin before freeing it.
  virtual void pin_host_memory(void* /*host*/, size_t /*bytes*/) {}
  virtual void unpin_host_memory(void* /*host*/) {}

  // Throws Error when this backend's attention cannot serve the geometry (the CPU serves any).
  virtual void check_attention_support(const AttentionDims& dims, int block_size) const {
    (void)dims;
    (void)block_size;
  }

  // Memory of the device; all zero on the CPU.
  virtual DeviceMemoryInfo memory_info() const { return {}; }
  virtual void reset_peak_memory() {}

  // Whether capture() records graphs (not on the CPU).
  virtual bool has_graphs() const { return false; }
  // Records the ops `body` issues (no allocation, no host copy inside) for replay; nullptr when
  // the backend has no graphs.
  virtual std::unique_ptr<CapturedGraph> capture(const std::function<void()>& body) {
    (void)body;
    return nullptr;
  }

  // out[t, :] = weight[ids[t] - first_id, :], or a zero row for an id outside
  // [first_id, first_id + V): one rank's shard of a vocabulary-parallel embedding (first_id 0
  // with the whole table: the plain lookup).  ids int32 [T]; weight [V, H]; out [T, H]
  virtual void embedding(const Tensor& ids, const Tensor& weight, int64_t first_id, Tensor out) = 0;

  // out = x * rsqrt(mean(x^2) + eps) * weight over the last dim.  x, out [R, H]; weight [H]
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out) = 0;

  // residual = x + residual; x = rms_norm(residual) * weight, both in place.  x, residual [R, H]
  virtual void add_rms_norm(Tensor x, Tensor residual, const Tensor& weight, float eps) = 0;

  // out = x @ weight^T.  x [M, K]; weight [N, K]; out [M, N]. out is of the compute dtype, or
  // f32 (the logits) with x and weight of the compute dtype.
  virtual void linear(const Tensor& x, const Tensor& weight, Tensor out) = 0;

  // x[r, :] += bias, rounded to the compute dtype: a linear's bias.  x [R, N]; bias [N]
  virtual void add_bias(Tensor x, const Tensor& bias) = 0;

  // out = x @ weight^T + bias, of the compute dtype.  bias [N]. The CUDA backend adds the bias
  // to the fp32 sums before rounding them once (as transformers' addmm does), in the GEMM's
  // epilogue; this default takes linear, then add_bias (the same in f32).
  virtual void linear_bias(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor out) {
    linear(x, weight, out);
    add_bias(out, bias);
  }

  // In place on the q and k heads of qkv [T, dims.qkv_size()]: per-head RMSNorm with
  // q_norm / k_norm [head_dim] (both undefined: none, as Llama and Qwen2 have none), then
  // neox-style rotary embedding at positions int32 [T] using cos_sin [max_positions, head_dim]
  // (cos in the first half of a row, sin in the second).
  virtual void qk_norm_rope(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm,
                            const Tensor& positions, const Tensor& cos_sin, float eps,
                            const AttentionDims& dims) = 0;

  // Writes the k and v heads of qkv [T, dims.qkv_size()] to cache slots metadata.slot_mapping.
  virtual void store_kv(const Tensor& qkv, const LayerKVCache& cache,
                        const AttentionMetadata& metadata, const AttentionDims& dims) = 0;

  // qk_norm_rope, then store_kv: the k heads go to the cache after their rotation. One pass
  // on the GPU.
  virtual void qk_norm_rope_store_kv(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm,
                                     const Tensor& positions, const Tensor& cos_sin, float eps,
                                     const AttentionDims& dims, const LayerKVCache& cache,
                                     const AttentionMetadata& metadata) {
    qk_norm_rope(qkv, q_norm, k_norm, positions, cos_sin, eps, dims);
    store_kv(qkv, cache, metadata, dims);
  }

  // Attention of the q heads of qkv [T, dims.qkv_size()] over the cached keys/values (which
  // already include this step's tokens), causal by position.  out [T, dims.q_size()]
  // The keys before this step's tokens must not come from the op just before this one: the GPU
  // starts reading them while that op finishes (the engine stores them in earlier steps).
  virtual void attention(const Tensor& qkv, const LayerKVCache& cache,
                         const AttentionMetadata& metadata, const AttentionDims& dims, float scale,
                         Tensor out) = 0;

  // qk_norm_rope_store_kv, then attention: the same out and cache, while qkv's q and k heads
  // are left either normalized or as they were. One kernel on the GPU at decode.
  virtual void qk_norm_rope_attention(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm,
                                      const Tensor& positions, const Tensor& cos_sin, float eps,
                                      const AttentionDims& dims, const LayerKVCache& cache,
                                      const AttentionMetadata& metadata, float scale, Tensor out) {
    qk_norm_rope_store_kv(qkv, q_norm, k_norm, positions, cos_sin, eps, dims, cache, metadata);
    attention(qkv, cache, metadata, dims, scale, out);
  }

  // out = silu(gate) * up where gate_up = [gate | up].  gate_up [T, 2I]; out [T, I]
  virtual void silu_mul(const Tensor& gate_up, Tensor out) = 0;

  // The router of a mixture-of-experts MLP (transformers' Qwen3-MoE): per row of router logits
  // [T, E] (of the compute dtype), the top_k experts by softmax probability (computed in f32;
  // most likely first, the lower id on ties) into ids int32 [T, top_k], and their
  // probabilities into weights f32 [T, top_k], divided by their sum when `normalize`, then
  // rounded to the compute dtype. 1 <= top_k <= E.
  virtual void moe_route(const Tensor& logits, int top_k, bool normalize, Tensor weights,
                         Tensor ids) = 0;

  // The experts of a mixture-of-experts MLP, each row through its top_k experts:
  // out[t] = sum_j weights[t, j] * silu_mul(x[t] @ gate_up[ids[t, j]]^T) @ down[ids[t, j]]^T.
  // The gate_up product and the activation are rounded to the compute dtype as linear and
  // silu_mul round them, and so is each expert's weighted output; the sum over j is taken in
  // f32 and rounded once. An id outside [0, E) is an error on the CPU and adds nothing on a GPU.
  // x [T, H]; ids int32 [T, k]; weights f32 [T, k]; gate_up [E, 2I, H] (each expert's gate rows,
  // then its up rows); down [E, H, I]; out [T, H], which may be x
  virtual void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                           const Tensor& gate_up, const Tensor& down, Tensor out) = 0;
  // moe_experts, then add_rms_norm(out, residual, norm_weight, eps): the next layer's input
  // norm, which a backend may fold into the experts' last step. residual [T, H]; norm_weight
  // [H].
  virtual void moe_experts_add_rms_norm(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                        const Tensor& gate_up, const Tensor& down, Tensor out,
                                        Tensor residual, const Tensor& norm_weight, float eps) {
    moe_experts(x, ids, weights, gate_up, down, out);
    add_rms_norm(out, residual, norm_weight, eps);
  }

  // What the one-row kernels below serve for a model of these widths: a model may run a
  // decode batch of one row through them (one kernel each on the GPU, in place of a norm, SiLU
  // or residual add before or after a linear, and of a whole MLP), 5 or 4 kernels a layer
  // instead of 8. `normed_features`: the fewest output features of the linears a norm rides in
  // (qkv_proj, gate_up_proj, the LM head). Where a flag is false, those ops throw.
  virtual OneRowKernels one_row_kernels(int64_t hidden, int64_t intermediate,
                                        int64_t normed_features) const {
    (void)hidden, (void)intermediate, (void)normed_features;
    return {};
  }
  // out = rms_norm(x, norm_weight, eps) @ weight^T.  x [M, K] (M up to 8); norm_weight [K];
  // weight [N, K]; out [M, N] of the compute dtype or f32. With `pending` (one row, see
  // rms_norm_mlp) the input is rms_norm(x + pending) instead, the sum rounded to the compute
  // dtype. With `bias` [N] (out of the compute dtype) it is added as linear_bias adds it.
  virtual void rms_norm_linear(const Tensor& x, const Tensor& norm_weight, float eps,
                               const Tensor& weight, Tensor out, Tensor pending = {},
                               const Tensor& bias = {}) {
    (void)x, (void)norm_weight, (void)eps, (void)weight, (void)out, (void)pending, (void)bias;
    unserved("rms_norm_linear");
  }
  // residual += x @ weight^T, the product rounded to the compute dtype first (linear, then the
  // add of add_rms_norm).  x [M, K]; weight [N, K]; residual [M, N]. With `pending` (one row)
  // the residual is first round(residual + pending), and pending is zeroed.
  virtual void linear_add(const Tensor& x, const Tensor& weight, Tensor residual,
                          Tensor pending = {}) {
    (void)x, (void)weight, (void)residual, (void)pending;
    unserved("linear_add");
  }

  // The MLP at one row (OneRowKernels::mlp). Its output is not added to the residual stream at
  // once but to a pending sum: int64 [1, H] in fixed point, units of 2^-32, which many CTAs add
  // to in any order with the same result. rms_norm_linear and linear_add fold it in when given
  // it, fold_pending writes it back, and it is all zeros between those:
  // pending += silu_mul(rms_norm(x, norm_weight, eps) @ gate_up_weight^T) @ down_weight^T,
  // each op rounded as alone except the last, whose products are summed unrounded.
  // x [1, H]; norm_weight [H]; gate_up_weight [2I, H]; down_weight [H, I]; pending i64 [1, H]
  virtual void rms_norm_mlp(const Tensor& x, const Tensor& norm_weight, float eps,
                            const Tensor& gate_up_weight, const Tensor& down_weight,
                            Tensor pending) {
    (void)x, (void)norm_weight, (void)eps, (void)gate_up_weight, (void)down_weight, (void)pending;
    unserved("rms_norm_mlp");
  }
  // residual = round(residual + pending); pending = 0.  residual [1, H]; pending i64 [1, H]
  virtual void fold_pending(Tensor residual, Tensor pending) {
    (void)residual, (void)pending;
    unserved("fold_pending");
  }
  // residual += silu_mul(gate_up) @ weight^T, rounded as linear_add.  gate_up [M, 2I];
  // weight [N, I]; residual [M, N]
  virtual void silu_linear_add(const Tensor& gate_up, const Tensor& weight, Tensor residual) {
    (void)gate_up, (void)weight, (void)residual;
    unserved("silu_linear_add");
  }

  // Tensor parallelism, over the group the backend was made with (without one, a group of one
  // rank: the sum is x, the gather a copy). Every rank of the group calls them in the same
  // order. x = the sum over the ranks of x, in place.  x [R, C] of the compute dtype
  virtual void all_reduce_sum(Tensor x) = 0;
  // out [R, ranks * C] = every rank's x [R, C], side by side in rank order.  f32 or the compute
  // dtype
  virtual void all_gather_columns(const Tensor& x, Tensor out) = 0;

  // out[i, :] = x[indices[i], :].  x [T, H]; indices int32 [B]; out [B, H]
  virtual void gather_rows(const Tensor& x, const Tensor& indices, Tensor out) = 0;

  // out[i] = ids[indices[i]] for int32 ids [N], indices int32 [B], out int32 [B]: the tokens
  // one step sampled become the next step's input on the device. An index outside [0, N)
  // is an error on the CPU and gives 0 on a GPU (a kernel cannot throw).
  virtual void gather_ids(const Tensor& ids, const Tensor& indices, Tensor out) = 0;

  // One token per row of logits f32 [B, V] into token_ids i32 [B], by the rule of
  // kernels/sampling_math.h; -1 for a row whose logits are all NaN.
  virtual void sample(const Tensor& logits, const SamplingTensors& params, Tensor token_ids) = 0;

  // Logprobs of token_ids i32 [B] under logits f32 [B, V], and the num_top (0 to 20) most
  // likely tokens of each row (out.top_* are [B, num_top], undefined when num_top is 0).
  virtual void compute_logprobs(const Tensor& logits, const Tensor& token_ids, int num_top,
                                const LogprobsTensors& out) = 0;

 private:
  [[noreturn]] static void unserved(const char* op) {
    throw Error(std::string(op) + ": not served by this backend (see one_row_kernels)");
  }
};

// Host memory pinned through a backend (Backend::pin_host_memory) for as long as this lives.
class HostPin {
 public:
  HostPin() = default;
  HostPin(Backend& backend, void* host, size_t bytes) : backend_(&backend), host_(host) {
    backend.pin_host_memory(host, bytes);
  }
  ~HostPin() { reset(); }
  HostPin(HostPin&& other) noexcept
      : backend_(other.backend_), host_(std::exchange(other.host_, nullptr)) {}
  HostPin& operator=(HostPin&& other) noexcept {
    if (this != &other) {
      reset();
      backend_ = other.backend_;
      host_ = std::exchange(other.host_, nullptr);
    }
    return *this;
  }
  HostPin(const HostPin&) = delete;
  HostPin& operator=(const HostPin&) = delete;

 private:
  void reset() {
    if (host_ != nullptr) backend_->unpin_host_memory(std::exchange(host_, nullptr));
  }

  Backend* backend_ = nullptr;
  void* host_ = nullptr;
};

// fp32 ops on a pool of num_threads threads (0: one per hardware thread), one rank of `group`
// (an in-process group, dist/in_process_group.h) when given one. Like every backend, it expects
// its ops to be called from one thread at a time.
std::unique_ptr<Backend> make_cpu_backend(int num_threads = 0,
                                          std::shared_ptr<Communicator> group = nullptr);

// Whether this build has the CUDA backend and a CUDA device is visible.
bool cuda_available();

// The CUDA backend on device `device` (which it makes the calling thread's current device: its
// ops are called from that thread), computing in `dtype` (f32, bf16 or f16), one rank of
// `group` (an NCCL group, cuda/runtime/nccl_group.h) when given one. Throws Error when the
// build has no CUDA backend, the device is not visible, or the dtype is not supported.
std::unique_ptr<Backend> make_cuda_backend(DType dtype, int device = 0,
                                           std::shared_ptr<Communicator> group = nullptr);

// A tensor-parallel group of the GPUs 0 to size - 1, through NCCL. Throws Error when the build
// has no CUDA backend, fewer GPUs are visible, or NCCL cannot be loaded.
std::vector<std::shared_ptr<Communicator>> make_gpu_group(int size);

}  // namespace nanovllm
