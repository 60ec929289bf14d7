// The CUDA backend's ops for one decode row that fold neighbouring ops into one kernel: the
// GEMVs that carry a norm, SiLU or residual add (gemv.h) and the MLP in one kernel with its
// pending sum (fused_mlp.h).
#include <cstdint>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/linear/fused_mlp.h"
#include "kernels/cuda/runtime/tensor_checks.h"

namespace nanovllm {

using cuda::check_contiguous;
using cuda::check_rows;

OneRowKernels CudaBackend::one_row_kernels(int64_t hidden, int64_t intermediate,
                                           int64_t normed_features) const {
  // Every CTA of a GEMV converts the whole input itself, so that work grows with the rows: a
  // win at one row (Qwen3-0.6B's GEMVs 0.66 -> 0.60 ms a step), a loss from two rows on (at 8
  // rows 1.09 ms against 0.75; docs/BENCHMARKS.md). So these serve one row only.
  OneRowKernels served;
  const bool half = dtype_ == DType::kBF16 || dtype_ == DType::kF16;
  // A norm wider than kGemvMaxNormWidth rides only in the persistent GEMV, so there the
  // narrowest normed linear must be a weight that kernel takes.
  alignas(16) static const char kAnyAligned[16] = {};  // stands for the operands' addresses
  cuda::GemvArgs narrowest_normed;
  narrowest_normed.in_dtype = narrowest_normed.out_dtype = dtype_;
  narrowest_normed.m = 1;
  narrowest_normed.n = normed_features;
  narrowest_normed.k = narrowest_normed.ldw = hidden;
  narrowest_normed.norm_weight = kAnyAligned;
  served.linears = half && intermediate % 8 == 0 && cuda::gemv_supported(narrowest_normed);
  served.mlp = served.linears && cuda::rms_norm_mlp_serves(dtype_, hidden, intermediate, num_sms_);
  return served;
}

// The GEMV operands of out = x @ weight^T, checked as linear checks them; `op` names the
// caller in errors. x is [M, k], or [M, 2k] for a [gate | up] x.
cuda::GemvArgs CudaBackend::gemv_args(const char* op, const Tensor& x, int64_t k,
                                      const Tensor& weight, const Tensor& out) const {
  check_rows(x, fmt::format("{} x", op), dtype_, {-1, -1});
  const int64_t m = x.size(0);
  check_rows(weight, fmt::format("{} weight", op), dtype_, {-1, k});
  const int64_t n = weight.size(0);
  check_rows(out, fmt::format("{} out", op), out.dtype(), {m, n});
  NVLLM_CHECK_MSG(out.data() != x.data() && out.data() != weight.data(),
                  "{} out must not share storage with its inputs", op);
  return cuda::GemvArgs{dtype_,
                        out.dtype(),
                        x.data(),
                        x.stride(0),
                        weight.data(),
                        weight.stride(0),
                        out.data(),
                        out.stride(0),
                        m,
                        n,
                        k};
}

void CudaBackend::run_gemv(const char* op, const cuda::GemvArgs& args) {
  NVLLM_CHECK_MSG(cuda::gemv_supported(args),
                  "{}: {} rows of width {} into {} are not served (one_row_kernels)", op, args.m,
                  args.k, args.n);
  cuda::gemv(args, stream());
}

int64_t* CudaBackend::pending_sum(const char* op, const Tensor& pending, const cuda::GemvArgs& args,
                                  int64_t width) const {
  if (!pending.defined()) return nullptr;
  check_contiguous(pending, fmt::format("{} pending", op), DType::kI64, {1, width});
  NVLLM_CHECK_MSG(args.m == 1, "{}: a pending sum goes with one row, not {}", op, args.m);
  return pending.data_as<int64_t>();
}

void CudaBackend::rms_norm_linear(const Tensor& x, const Tensor& norm_weight, float eps,
                                  const Tensor& weight, Tensor out, Tensor pending,
                                  const Tensor& bias) {
  NVLLM_CHECK_MSG(out.dtype() == dtype_ || out.dtype() == DType::kF32,
                  "rms_norm_linear out is {}, expected {} or float32", dtype_name(out.dtype()),
                  dtype_name(dtype_));
  cuda::GemvArgs args = gemv_args("rms_norm_linear", x, x.size(1), weight, out);
  check_contiguous(norm_weight, "rms_norm_linear norm_weight", dtype_, {args.k});
  args.norm_weight = norm_weight.data();
  args.eps = eps;
  args.pending = pending_sum("rms_norm_linear", pending, args, args.k);
  if (bias.defined()) {
    NVLLM_CHECK_MSG(out.dtype() == dtype_, "rms_norm_linear with a bias into {} out",
                    dtype_name(out.dtype()));
    check_contiguous(bias, "rms_norm_linear bias", dtype_, {args.n});
    args.bias = bias.data();
  }
  run_gemv("rms_norm_linear", args);
}

void CudaBackend::linear_add(const Tensor& x, const Tensor& weight, Tensor residual,
                             Tensor pending) {
  check_rows(residual, "linear_add residual", dtype_, {-1, -1});
  cuda::GemvArgs args = gemv_args("linear_add", x, x.size(1), weight, residual);
  args.residual = residual.data();
  args.ldr = residual.stride(0);
  args.pending = pending_sum("linear_add", pending, args, args.n);
  run_gemv("linear_add", args);
}

void CudaBackend::rms_norm_mlp(const Tensor& x, const Tensor& norm_weight, float eps,
                               const Tensor& gate_up_weight, const Tensor& down_weight,
                               Tensor pending) {
  check_rows(x, "rms_norm_mlp x", dtype_, {1, -1});
  const int64_t hidden = x.size(1);
  check_contiguous(norm_weight, "rms_norm_mlp norm_weight", dtype_, {hidden});
  check_rows(gate_up_weight, "rms_norm_mlp gate_up_weight", dtype_, {-1, hidden});
  const int64_t intermediate = gate_up_weight.size(0) / 2;
  NVLLM_CHECK_MSG(gate_up_weight.size(0) % 2 == 0,
                  "rms_norm_mlp gate_up_weight {} has an odd height",
                  gate_up_weight.shape_string());
  check_rows(down_weight, "rms_norm_mlp down_weight", dtype_, {hidden, intermediate});
  check_contiguous(pending, "rms_norm_mlp pending", DType::kI64, {1, hidden});
  cuda::RmsNormMlpArgs args;
  args.dtype = dtype_;
  args.x = x.data();
  args.norm_weight = norm_weight.data();
  args.eps = eps;
  args.gate_up = gate_up_weight.data();
  args.ld_gate_up = gate_up_weight.stride(0);
  args.down = down_weight.data();
  args.ld_down = down_weight.stride(0);
  args.pending = pending.data_as<int64_t>();
  args.hidden = hidden;
  args.intermediate = intermediate;
  args.num_sms = num_sms_;
  NVLLM_CHECK_MSG(cuda::rms_norm_mlp_serves(dtype_, hidden, intermediate, num_sms_),
                  "rms_norm_mlp: hidden {} and intermediate {} are not served (one_row_kernels)",
                  hidden, intermediate);
  cuda::rms_norm_mlp(args, stream());
}

void CudaBackend::fold_pending(Tensor residual, Tensor pending) {
  check_contiguous(residual, "fold_pending residual", dtype_, {1, -1});
  check_contiguous(pending, "fold_pending pending", DType::kI64, {1, residual.size(1)});
  cuda::fold_pending(dtype_, residual.data(), pending.data_as<int64_t>(), residual.size(1),
                     stream());
}

void CudaBackend::silu_linear_add(const Tensor& gate_up, const Tensor& weight, Tensor residual) {
  check_rows(gate_up, "silu_linear_add gate_up", dtype_, {-1, -1});
  NVLLM_CHECK_MSG(gate_up.size(1) % 2 == 0, "silu_linear_add gate_up {} has an odd width",
                  gate_up.shape_string());
  check_rows(residual, "silu_linear_add residual", dtype_, {-1, -1});
  cuda::GemvArgs args =
      gemv_args("silu_linear_add", gate_up, gate_up.size(1) / 2, weight, residual);
  args.silu_gate = true;
  args.residual = residual.data();
  args.ldr = residual.stride(0);
  run_gemv("silu_linear_add", args);
}

}  // namespace nanovllm
