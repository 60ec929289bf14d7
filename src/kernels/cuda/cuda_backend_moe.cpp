// The CUDA backend's mixture-of-experts ops: the router (softmax and top-k) and the experts
// (moe/moe.h: align, the grouped gate_up and down GEMMs, the combine), checked on the host
// before anything is launched.
#include <cstdint>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/runtime/tensor_checks.h"

namespace nanovllm {

using cuda::check_contiguous;
using cuda::check_rows;

void CudaBackend::moe_route(const Tensor& logits, int top_k, bool normalize, Tensor weights,
                            Tensor ids) {
  check_rows(logits, "moe_route logits", dtype_, {-1, -1});
  const int64_t rows = logits.size(0);
  const int64_t experts = logits.size(1);
  NVLLM_CHECK_MSG(experts >= 1 && experts <= cuda::kMoeRouteMaxExperts,
                  "moe_route logits {}: {} experts, expected 1 to {}", logits.shape_string(),
                  experts, cuda::kMoeRouteMaxExperts);
  NVLLM_CHECK_MSG(top_k >= 1 && top_k <= experts, "moe_route: top_k {} outside [1, {}]", top_k,
                  experts);
  check_contiguous(weights, "moe_route weights", DType::kF32, {rows, top_k});
  check_contiguous(ids, "moe_route ids", DType::kI32, {rows, top_k});
  NVLLM_CHECK_MSG(rows <= INT32_MAX, "moe_route: {} rows", rows);
  NVLLM_CHECK_MSG(rows == 0 || weights.data() != ids.data(),
                  "moe_route weights and ids share storage");
  cuda::MoeRouteArgs args;
  args.dtype = dtype_;
  args.logits = logits.data();
  args.logits_stride = logits.stride(0);
  args.rows = rows;
  args.experts = experts;
  args.top_k = top_k;
  args.normalize = normalize;
  args.weights = weights.data_as<float>();
  args.ids = ids.data_as<int32_t>();
  cuda::moe_route(args, stream());
}

void CudaBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                              const Tensor& gate_up, const Tensor& down, Tensor out) {
  run_moe_experts(x, ids, weights, gate_up, down, out, {});
}

void CudaBackend::moe_experts_add_rms_norm(const Tensor& x, const Tensor& ids,
                                           const Tensor& weights, const Tensor& gate_up,
                                           const Tensor& down, Tensor out, Tensor residual,
                                           const Tensor& norm_weight, float eps) {
  check_rows(out, "moe_experts_add_rms_norm out", dtype_, {-1, -1});
  check_rows(residual, "moe_experts_add_rms_norm residual", dtype_, {out.size(0), out.size(1)});
  check_contiguous(norm_weight, "moe_experts_add_rms_norm norm_weight", dtype_, {out.size(1)});
  NVLLM_CHECK_MSG(
      out.size(0) == 0 || (residual.data() != out.data() && residual.data() != x.data() &&
                           residual.data() != ids.data() && residual.data() != weights.data()),
      "moe_experts_add_rms_norm residual shares storage with another operand");
  cuda::MoeAddRmsNorm then;
  then.residual = residual.data();
  then.residual_stride = residual.stride(0);
  then.weight = norm_weight.data();
  then.eps = eps;
  run_moe_experts(x, ids, weights, gate_up, down, out, then);
}

void CudaBackend::run_moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                  const Tensor& gate_up, const Tensor& down, Tensor out,
                                  const cuda::MoeAddRmsNorm& then) {
  check_rows(x, "moe_experts x", dtype_, {-1, -1});
  const int64_t rows = x.size(0);
  const int64_t hidden = x.size(1);
  check_contiguous(ids, "moe_experts ids", DType::kI32, {rows, -1});
  const int64_t top_k = ids.size(1);
  check_contiguous(weights, "moe_experts weights", DType::kF32, {rows, top_k});
  check_contiguous(gate_up, "moe_experts gate_up", dtype_, {-1, -1, hidden});
  const int64_t experts = gate_up.size(0);
  NVLLM_CHECK_MSG(gate_up.size(1) > 0 && gate_up.size(1) % 2 == 0,
                  "moe_experts gate_up {} is not [experts, 2 * intermediate, {}]",
                  gate_up.shape_string(), hidden);
  const int64_t intermediate = gate_up.size(1) / 2;
  NVLLM_CHECK_MSG(experts >= 1 && experts <= cuda::kMoeMaxExperts,
                  "moe_experts gate_up {}: {} experts, expected 1 to {}", gate_up.shape_string(),
                  experts, cuda::kMoeMaxExperts);
  check_contiguous(down, "moe_experts down", dtype_, {experts, hidden, intermediate});
  check_rows(out, "moe_experts out", dtype_, {rows, hidden});
  // out may be x (moe_combine writes it after every read of x), but not the routing.
  NVLLM_CHECK_MSG(
      rows == 0 || hidden == 0 || (out.data() != ids.data() && out.data() != weights.data()),
      "moe_experts out must not share storage with ids or weights");
  cuda::MoeExpertsArgs args;
  args.dtype = dtype_;
  args.x = x.data();
  args.x_stride = x.stride(0);
  args.ids = ids.data_as<int32_t>();
  args.weights = weights.data_as<float>();
  args.gate_up = gate_up.data();
  args.down = down.data();
  args.out = out.data();
  args.out_stride = out.stride(0);
  args.rows = rows;
  args.hidden = hidden;
  args.intermediate = intermediate;
  args.experts = experts;
  NVLLM_CHECK_MSG(top_k <= INT32_MAX && rows * top_k <= INT32_MAX / 4,
                  "moe_experts ids {}: too many pairs", ids.shape_string());
  args.top_k = static_cast<int>(top_k);
  args.then = then;
  void* scratch = grow_scratch(moe_scratch_, cuda::moe_experts_scratch_bytes(args), "moe_experts");
  cuda::moe_experts(args, scratch, stream());
}

}  // namespace nanovllm
