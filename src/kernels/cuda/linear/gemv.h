// out = x @ weight^T for a few rows of x (decode batches): a kernel that streams the weight
// once at close to memory bandwidth, where cuBLASLt's small-M tiles fall well short of it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace nanovllm::cuda {

// Row-major operands, rows `ld*` elements apart (the last dimension is contiguous).
struct GemvArgs {
  DType in_dtype = DType::kBF16;   // of x and weight
  DType out_dtype = DType::kBF16;  // in_dtype or f32
  const void* x = nullptr;         // [m, k]
  int64_t ldx = 0;
  const void* weight = nullptr;  // [n, k]
  int64_t ldw = 0;
  void* out = nullptr;  // [m, n]; must not overlap x or weight
  int64_t ldo = 0;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  // What the input rows are, instead of x itself (at most one of the two):
  // - norm_weight set: rms_norm(x row) * norm_weight [k] with `eps`, rounded as rms_norm rounds;
  // - silu_gate: x rows are [gate | up], 2k wide, and the input is silu(gate) * up, rounded as
  //   silu_mul rounds.
  const void* norm_weight = nullptr;
  float eps = 0.0f;
  bool silu_gate = false;
  // Set: out = (x @ weight^T rounded to in_dtype) + residual [m, n], rounded as add_rms_norm
  // adds; residual may be out itself. out_dtype must be in_dtype, here and with silu_gate, and
  // the residual add does not come with norm_weight.
  const void* residual = nullptr;
  int64_t ldr = 0;
  // Set: [n] of in_dtype, added to each output's fp32 sum before it is rounded (a linear's
  // bias, as cuBLASLt's bias epilogue adds it); not with the residual add.
  const void* bias = nullptr;
  // One row only, with norm_weight or residual: the residual stream is that row plus `pending`
  // (fixed point, fixed_point.cuh). With norm_weight the input is rms_norm(round(x +
  // pending)) [k]; with residual, out = round(product) + round(residual + pending) [n], and
  // pending is zeroed.
  int64_t* pending = nullptr;
};

// The most rows of x the kernel takes.
inline constexpr int64_t kGemvMaxRows = 8;

// The widest row the RMS norm of the input can be taken over by the kernel of a CTA a tile (a
// CTA holds the whole row in its lanes' registers). The persistent kernel stages the row in
// shared memory and takes any width (gemv_persistent_serves).
inline constexpr int64_t kGemvMaxNormWidth = 4096;

// Whether gemv() serves `args`: x and weight bf16 or f16, out of their dtype or f32;
// 1 <= m <= kGemvMaxRows, n >= 1, k a positive multiple of 8; x, weight and norm_weight
// 16-byte aligned with row strides (where there is more than one row) multiples of 8 elements;
// with norm_weight, k at most kGemvMaxNormWidth or a weight the persistent kernel takes; no
// bias with residual. out, residual and bias may have any alignment, out and residual any row
// stride.
bool gemv_supported(const GemvArgs& args);

// Enqueues the kernel on `stream` (fp32 accumulation, deterministic, no allocation). `args`
// must satisfy gemv_supported().
void gemv(const GemvArgs& args, cudaStream_t stream);

}  // namespace nanovllm::cuda
