// The CPU backend: device memory is host memory, everything is fp32, ops share one thread pool.
#include <cstring>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"

namespace nanovllm {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(int num_threads, std::shared_ptr<Communicator> group)
      : pool_(num_threads), group_(std::move(group)) {}

  Device device() const override { return Device::kCPU; }
  DType compute_dtype() const override { return DType::kF32; }

  void upload(Tensor dst, const void* host_src) override {
    check_host_copy(dst, "upload destination");
    if (dst.nbytes() > 0) std::memcpy(dst.data(), host_src, dst.nbytes());
  }
  void download(void* host_dst, const Tensor& src) override {
    check_host_copy(src, "download source");
    if (src.nbytes() > 0) std::memcpy(host_dst, src.data(), src.nbytes());
  }
  void synchronize() override {}

  void embedding(const Tensor& ids, const Tensor& weight, int64_t first_id, Tensor out) override {
    cpu::embedding(ids, weight, first_id, out, pool_);
  }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out) override {
    cpu::rms_norm(x, weight, eps, out, pool_);
  }
  void add_rms_norm(Tensor x, Tensor residual, const Tensor& weight, float eps) override {
    cpu::add_rms_norm(x, residual, weight, eps, pool_);
  }
  void linear(const Tensor& x, const Tensor& weight, Tensor out) override {
    cpu::linear(x, weight, out, pool_);
  }
  void qk_norm_rope(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                    const Tensor& cos_sin, float eps, const AttentionDims& dims) override {
    cpu::qk_norm_rope(qkv, q_norm, k_norm, positions, cos_sin, eps, dims, pool_);
  }
  void store_kv(const Tensor& qkv, const LayerKVCache& cache, const AttentionMetadata& metadata,
                const AttentionDims& dims) override {
    cpu::store_kv(qkv, cache, metadata, dims, pool_);
  }
  void attention(const Tensor& qkv, const LayerKVCache& cache, const AttentionMetadata& metadata,
                 const AttentionDims& dims, float scale, Tensor out) override {
    cpu::attention(qkv, cache, metadata, dims, scale, out, pool_);
  }
  void silu_mul(const Tensor& gate_up, Tensor out) override { cpu::silu_mul(gate_up, out, pool_); }
  void moe_route(const Tensor& logits, int top_k, bool normalize, Tensor weights,
                 Tensor ids) override {
    cpu::moe_route(logits, top_k, normalize, weights, ids, pool_);
  }
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                   const Tensor& down, Tensor out) override {
    cpu::moe_experts(x, ids, weights, gate_up, down, out, pool_);
  }
  void all_reduce_sum(Tensor x) override {
    if (group_) group_->all_reduce_sum(x, nullptr);
  }
  void add_bias(Tensor x, const Tensor& bias) override { cpu::add_bias(x, bias); }
  void all_gather_columns(const Tensor& x, Tensor out) override {
    if (group_) return group_->all_gather_columns(x, out, nullptr);
    cpu::copy_rows(x, out);
  }
  void gather_rows(const Tensor& x, const Tensor& indices, Tensor out) override {
    cpu::gather_rows(x, indices, out, pool_);
  }
  void gather_ids(const Tensor& ids, const Tensor& indices, Tensor out) override {
    cpu::gather_ids(ids, indices, out);
  }
  void sample(const Tensor& logits, const SamplingTensors& params, Tensor token_ids) override {
    cpu::sample(logits, params, token_ids, pool_);
  }
  void compute_logprobs(const Tensor& logits, const Tensor& token_ids, int num_top,
                        const LogprobsTensors& out) override {
    cpu::compute_logprobs(logits, token_ids, num_top, out, pool_);
  }

 private:
  static void check_host_copy(const Tensor& tensor, std::string_view name) {
    NVLLM_CHECK_MSG(tensor.device() == Device::kCPU, "{} is on {}, expected cpu", name,
                    device_name(tensor.device()));
    NVLLM_CHECK_MSG(tensor.is_contiguous(), "{} {} is not contiguous", name, tensor.shape_string());
  }

  cpu::ThreadPool pool_;
  std::shared_ptr<Communicator> group_;  // null: one rank
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int num_threads, std::shared_ptr<Communicator> group) {
  return std::make_unique<CpuBackend>(num_threads, std::move(group));
}

}  // namespace nanovllm
