// A Backend for loader tests: host memory, upload/download as memcpy, no compute.
#pragma once

#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/backend.h"

namespace nanovllm::testing {

class FakeBackend : public Backend {
 public:
  explicit FakeBackend(DType compute_dtype) : compute_dtype_(compute_dtype) {}

  Device device() const override { return Device::kCPU; }
  DType compute_dtype() const override { return compute_dtype_; }

  void upload(Tensor dst, const void* host_src) override {
    ++uploads;
    std::memcpy(dst.data(), host_src, dst.nbytes());
  }
  void download(void* host_dst, const Tensor& src) override {
    std::memcpy(host_dst, src.data(), src.nbytes());
  }
  void synchronize() override {}

  // Host copy of a contiguous tensor's bytes.
  template <typename T>
  std::vector<T> read(const Tensor& tensor) {
    std::vector<T> values(tensor.nbytes() / sizeof(T));
    download(values.data(), tensor);
    return values;
  }

  void embedding(const Tensor&, const Tensor&, int64_t, Tensor) override { unsupported(); }
  void rms_norm(const Tensor&, const Tensor&, float, Tensor) override { unsupported(); }
  void add_rms_norm(Tensor, Tensor, const Tensor&, float) override { unsupported(); }
  void linear(const Tensor&, const Tensor&, Tensor) override { unsupported(); }
  void qk_norm_rope(Tensor, const Tensor&, const Tensor&, const Tensor&, const Tensor&, float,
                    const AttentionDims&) override {
    unsupported();
  }
  void store_kv(const Tensor&, const LayerKVCache&, const AttentionMetadata&,
                const AttentionDims&) override {
    unsupported();
  }
  void attention(const Tensor&, const LayerKVCache&, const AttentionMetadata&, const AttentionDims&,
                 float, Tensor) override {
    unsupported();
  }
  void silu_mul(const Tensor&, Tensor) override { unsupported(); }
  void all_reduce_sum(Tensor) override { unsupported(); }
  void add_bias(Tensor, const Tensor&) override { unsupported(); }
  void moe_route(const Tensor&, int, bool, Tensor, Tensor) override { unsupported(); }
  void moe_experts(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                   Tensor) override {
    unsupported();
  }
  void all_gather_columns(const Tensor&, Tensor) override { unsupported(); }
  void gather_rows(const Tensor&, const Tensor&, Tensor) override { unsupported(); }
  void gather_ids(const Tensor&, const Tensor&, Tensor) override { unsupported(); }
  void sample(const Tensor&, const SamplingTensors&, Tensor) override { unsupported(); }
  void compute_logprobs(const Tensor&, const Tensor&, int, const LogprobsTensors&) override {
    unsupported();
  }

  int uploads = 0;

 private:
  [[noreturn]] static void unsupported() { throw Error("FakeBackend computes nothing"); }

  DType compute_dtype_;
};

}  // namespace nanovllm::testing
