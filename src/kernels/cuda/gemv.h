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
};

// The most rows of x the kernel takes.
inline constexpr int64_t kGemvMaxRows = 8;

// Whether gemv() serves `args`: x and weight bf16 or f16, out of their dtype or f32;
// 1 <= m <= kGemvMaxRows, n >= 1, k a positive multiple of 8; x and weight 16-byte aligned with
// row strides (where there is more than one row) multiples of 8 elements. out may have any
// alignment and row stride.
bool gemv_supported(const GemvArgs& args);

// Enqueues the kernel on `stream` (fp32 accumulation, deterministic, no allocation). `args`
// must satisfy gemv_supported().
void gemv(const GemvArgs& args, cudaStream_t stream);

}  // namespace nanovllm::cuda
