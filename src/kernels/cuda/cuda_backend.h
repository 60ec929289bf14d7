// The CUDA backend's class, shared by the files that define its ops: cuda_backend.cpp (copies,
// graphs, the elementwise ops, attention, sampling), cuda_backend_one_row.cpp (the GEMVs
// that carry their neighbours and the MLP kernel at one row) and cuda_backend_moe.cpp (the
// mixture-of-experts router and experts). Only make_cuda_backend()
// (backend.h) is meant for the rest of the project.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/buffer.h"
#include "kernels/backend.h"
#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/hopper_prefill.h"
#include "kernels/cuda/linear/cublaslt_linear.h"
#include "kernels/cuda/linear/gemv.h"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/runtime/device_allocator.h"
#include "kernels/cuda/runtime/stream_tickets.h"

namespace nanovllm {

struct StreamDeleter {
  void operator()(cudaStream_t stream) const { (void)cudaStreamDestroy(stream); }
};
using StreamHandle = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;

class CudaBackend final : public Backend {
 public:
  CudaBackend(DType dtype, int device, std::shared_ptr<Communicator> group);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::kCUDA; }
  DType compute_dtype() const override { return dtype_; }

  void upload(Tensor dst, const void* host_src) override;
  void download(void* host_dst, const Tensor& src) override;
  void synchronize() override;
  uint64_t upload_async(Tensor dst, const void* host_src) override;
  uint64_t download_async(void* host_dst, const Tensor& src) override;
  void wait_for(uint64_t ticket) override;
  void pin_host_memory(void* host, size_t bytes) override;
  void unpin_host_memory(void* host) override;
  void check_attention_support(const AttentionDims& dims, int block_size) const override;
  DeviceMemoryInfo memory_info() const override;
  void reset_peak_memory() override { cuda::reset_allocator_peak(device_); }
  bool has_graphs() const override { return true; }
  std::unique_ptr<CapturedGraph> capture(const std::function<void()>& body) override;

  void embedding(const Tensor& ids, const Tensor& weight, int64_t first_id, Tensor out) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out) override;
  void add_rms_norm(Tensor x, Tensor residual, const Tensor& weight, float eps) override;
  void linear(const Tensor& x, const Tensor& weight, Tensor out) override;
  void linear_bias(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor out) override;
  void qk_norm_rope(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                    const Tensor& cos_sin, float eps, const AttentionDims& dims) override;
  void store_kv(const Tensor& qkv, const LayerKVCache& cache, const AttentionMetadata& metadata,
                const AttentionDims& dims) override;
  void qk_norm_rope_store_kv(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm,
                             const Tensor& positions, const Tensor& cos_sin, float eps,
                             const AttentionDims& dims, const LayerKVCache& cache,
                             const AttentionMetadata& metadata) override;
  void attention(const Tensor& qkv, const LayerKVCache& cache, const AttentionMetadata& metadata,
                 const AttentionDims& dims, float scale, Tensor out) override;
  void qk_norm_rope_attention(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm,
                              const Tensor& positions, const Tensor& cos_sin, float eps,
                              const AttentionDims& dims, const LayerKVCache& cache,
                              const AttentionMetadata& metadata, float scale, Tensor out) override;
  void silu_mul(const Tensor& gate_up, Tensor out) override;
  void moe_route(const Tensor& logits, int top_k, bool normalize, Tensor weights,
                 Tensor ids) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                   const Tensor& down, Tensor out) override;
  void moe_experts_add_rms_norm(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                const Tensor& gate_up, const Tensor& down, Tensor out,
                                Tensor residual, const Tensor& norm_weight, float eps) override;
  OneRowKernels one_row_kernels(int64_t hidden, int64_t intermediate,
                                int64_t normed_features) const override;
  void rms_norm_linear(const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& weight,
                       Tensor out, Tensor pending, const Tensor& bias) override;
  void linear_add(const Tensor& x, const Tensor& weight, Tensor residual, Tensor pending) override;
  void rms_norm_mlp(const Tensor& x, const Tensor& norm_weight, float eps,
                    const Tensor& gate_up_weight, const Tensor& down_weight,
                    Tensor pending) override;
  void fold_pending(Tensor residual, Tensor pending) override;
  void silu_linear_add(const Tensor& gate_up, const Tensor& weight, Tensor residual) override;
  void add_bias(Tensor x, const Tensor& bias) override;
  void all_reduce_sum(Tensor x) override;
  void all_gather_columns(const Tensor& x, Tensor out) override;
  void gather_rows(const Tensor& x, const Tensor& indices, Tensor out) override;
  void gather_ids(const Tensor& ids, const Tensor& indices, Tensor out) override;
  void sample(const Tensor& logits, const SamplingTensors& params, Tensor token_ids) override;
  void compute_logprobs(const Tensor& logits, const Tensor& token_ids, int num_top,
                        const LogprobsTensors& out) override;

 private:
  cudaStream_t stream() const { return stream_.get(); }
  cuda::GemvArgs gemv_args(const char* op, const Tensor& x, int64_t k, const Tensor& weight,
                           const Tensor& out) const;
  void run_gemv(const char* op, const cuda::GemvArgs& args);
  // The pending sum for a GEMV of `args` (nullptr when `pending` is undefined), checked.
  int64_t* pending_sum(const char* op, const Tensor& pending, const cuda::GemvArgs& args,
                       int64_t width) const;
  bool capturing() const;
  void check_not_capturing(std::string_view what) const;
  // `scratch` grown to at least `bytes` (its contents are not kept); growing allocates, which
  // a graph capture cannot record, so it throws while capturing. Scratch only grows, a few
  // times, so outgrown buffers are kept rather than freed.
  void* grow_scratch(Buffer& scratch, size_t bytes, std::string_view user);
  cuda::QkNormRopeArgs qk_norm_rope_args(const Tensor& qkv, const Tensor& q_norm,
                                         const Tensor& k_norm, const Tensor& positions,
                                         const Tensor& cos_sin, float eps,
                                         const AttentionDims& dims) const;
  // Checked operands of linear() and linear_bias().
  cuda::LinearArgs linear_args(const Tensor& x, const Tensor& weight, const Tensor& out) const;
  // qk_norm_rope_args() with the store into `cache` at metadata.slot_mapping.
  cuda::QkNormRopeArgs qk_norm_rope_store_kv_args(const Tensor& qkv, const Tensor& q_norm,
                                                  const Tensor& k_norm, const Tensor& positions,
                                                  const Tensor& cos_sin, float eps,
                                                  const AttentionDims& dims,
                                                  const LayerKVCache& cache,
                                                  const AttentionMetadata& metadata) const;
  // moe_experts(), with `then` (its residual null: none) folded into the last step.
  void run_moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                       const Tensor& gate_up, const Tensor& down, Tensor out,
                       const cuda::MoeAddRmsNorm& then);
  // attention(), with `fused` (its qkv null: none) done on the fly (attention_ops.h).
  void run_attention(const Tensor& qkv, const LayerKVCache& cache,
                     const AttentionMetadata& metadata, const AttentionDims& dims, float scale,
                     Tensor out, const cuda::QkNormRopeArgs& fused);
  void check_copy(const Tensor& tensor, const void* host, std::string_view name) const;
  // Enqueues a copy of `bytes` and returns its ticket (0 when there is nothing to copy).
  uint64_t enqueue_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                        std::string_view what);

  DType dtype_;
  int device_ = 0;
  std::shared_ptr<Communicator> group_;  // null: one rank
  int num_sms_ = 0;
  int compute_capability_ = 0;  // major * 10 + minor
  StreamHandle stream_;
  std::unique_ptr<cuda::CublasLtLinear> linear_;
#ifdef NANOVLLM_HOPPER_PREFILL
  cuda::HopperPrefillAttention hopper_prefill_;
#endif
  Buffer sampling_scratch_;
  Buffer moe_scratch_;  // moe_experts: the tile map, activations and weighted expert outputs
  std::vector<Buffer> retired_scratch_;  // outgrown scratch that graphs may still name
  cuda::StreamTickets tickets_;          // of the copies
#ifdef NANOVLLM_TIMELINE
  std::string timeline_path_;  // NANOVLLM_TIMELINE_OUT: where the destructor writes the timeline
#endif
};

}  // namespace nanovllm
