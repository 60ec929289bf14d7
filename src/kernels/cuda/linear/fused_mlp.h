// A decode row's MLP in one kernel: the output of down_proj is added to a pending sum in fixed
// point (fixed_point.cuh) by every CTA for its share of the intermediate columns, so no second
// kernel has to wait for the whole SiLU * up row before it can start on down_proj.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace nanovllm::cuda {

struct RmsNormMlpArgs {
  DType dtype = DType::kBF16;         // of x and the weights: bf16 or f16
  const void* x = nullptr;            // [hidden], the residual stream's row
  const void* norm_weight = nullptr;  // [hidden]
  float eps = 0.0f;
  const void* gate_up = nullptr;  // [2 intermediate, hidden]: gate rows, then up rows
  int64_t ld_gate_up = 0;
  const void* down = nullptr;  // [hidden, intermediate]
  int64_t ld_down = 0;
  int64_t* pending = nullptr;  // [hidden] fixed point, added to
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int num_sms = 0;
};

// Whether rms_norm_mlp() serves a model of these widths on a GPU of num_sms SMs: bf16 or f16;
// hidden 256, 512 or 1024 (a warp holds the whole row, a thread computes up to 4 outputs);
// intermediate a positive multiple of 8, at most two CTAs of 16 columns an SM (more would
// wait for SMs to free up rather than stream while the kernels before them run).
// Qwen3-0.6B's 1024 x 3072 is served; the larger models' widths are not, and they run two
// GEMVs.
bool rms_norm_mlp_serves(DType dtype, int64_t hidden, int64_t intermediate, int num_sms);

// pending += silu(gate) * up @ down^T where [gate | up] = rms_norm(x) @ gate_up^T, with the
// roundings of rms_norm_linear and silu_mul (the sum of squares in another order); the
// down_proj products are added unrounded. Deterministic, no allocation. The operands must be
// 16-byte aligned, with row strides in multiples of 8 elements.
void rms_norm_mlp(const RmsNormMlpArgs& args, cudaStream_t stream);

// residual [width] = round(residual + pending); pending [width] = 0.
void fold_pending(DType dtype, void* residual, int64_t* pending, int64_t width,
                  cudaStream_t stream);

}  // namespace nanovllm::cuda
