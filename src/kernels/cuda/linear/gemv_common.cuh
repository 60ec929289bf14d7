// What the two GEMV kernels share (gemv.cu: a CTA a tile; gemv_persistent.cu: persistent CTAs
// for large weights): the tile's shape, a lane's share of a step, the copies into shared memory,
// the inputs that can ride along and the kernels' parameters.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/linear/gemv.h"

namespace nanovllm::cuda::gemv_detail {

constexpr int kTileRows = 8;        // weight rows per CTA: the MMA's n
constexpr int kLanesPerRow = 4;     // lanes sharing a weight row (and an x row)
constexpr int kVectorsPerStep = 8;  // 16-byte weight loads per lane in flight at once
constexpr int kMaxWarps = 16;       // warps splitting k in one CTA
constexpr int kElemsPerVector = 8;  // bf16/f16 elements in 16 bytes
constexpr int kStepVectors = kLanesPerRow * kVectorsPerStep;  // of one row, per warp and step

static_assert(kGemvMaxRows == kTileRows, "lane group g serves x row g as well as tile row g");

// Copies 16 bytes global -> shared; with `valid` false nothing is read and the destination is
// zero-filled. The weight is read once: it bypasses L1, comes from DRAM in 256-byte pieces (a
// warp reads 512 contiguous bytes of a row per step) and leaves L2 first (`policy`:
// l2_evict_first_policy()). Every CTA reads all of x: it stays in L1 for the other CTAs on
// the SM.
__device__ __forceinline__ void copy_weight_async(void* smem, const void* global, bool valid,
                                                  uint64_t policy) {
  const auto smem_address = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2, %3;\n" ::"r"(
                   smem_address),
               "l"(global), "r"(valid ? 16 : 0), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void copy_x_async(void* smem, const void* global, bool valid) {
  const auto smem_address = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address), "l"(global),
               "r"(valid ? 16 : 0)
               : "memory");
}

enum class Input { kX, kRmsNorm, kSiluGate };

// gemv_supported() but for the width of a norm (the persistent kernel takes any it can stage).
bool gemv_operands_supported(const GemvArgs& args);

template <typename T, typename OutT>
struct GemvParams {
  const T* x;  // [m, k], or [m, 2k] with kSiluGate
  int64_t ldx;
  const T* weight;  // [n, k]
  int64_t ldw;
  OutT* out;  // [m, n]; may be residual
  int64_t ldo;
  int m;
  int64_t n, k;
  const T* norm_weight;  // [k], kRmsNorm
  float eps;
  const T* residual;  // [m, n] or nullptr
  int64_t ldr;
  const T* bias;     // [n] or nullptr; not with kAddResidual
  int64_t* pending;  // [k] with kRmsNorm, [n] with kAddResidual, or nullptr; m == 1
};

template <typename T, typename OutT>
GemvParams<T, OutT> gemv_params(const GemvArgs& args) {
  return GemvParams<T, OutT>{static_cast<const T*>(args.x),
                             args.ldx,
                             static_cast<const T*>(args.weight),
                             args.ldw,
                             static_cast<OutT*>(args.out),
                             args.ldo,
                             static_cast<int>(args.m),
                             args.n,
                             args.k,
                             static_cast<const T*>(args.norm_weight),
                             args.eps,
                             static_cast<const T*>(args.residual),
                             args.ldr,
                             static_cast<const T*>(args.bias),
                             args.pending};
}

// Calls Launch<T, OutT, kInput, kAddResidual>::run(args, rest...) for the kernel `args` asks for,
// of the combinations the model uses (gemv_supported admits no other): plain or normalized input
// into the input dtype or f32, SiLU-gated input into the input dtype, the residual add after a
// plain or SiLU-gated input.
template <template <typename, typename, Input, bool> class Launch, typename T, typename... Rest>
void dispatch_inputs(const GemvArgs& args, Rest... rest) {
  const bool f32_out = args.out_dtype == DType::kF32;
  if (args.residual != nullptr) {
    if (args.silu_gate) return Launch<T, T, Input::kSiluGate, true>::run(args, rest...);
    return Launch<T, T, Input::kX, true>::run(args, rest...);
  }
  if (args.silu_gate) return Launch<T, T, Input::kSiluGate, false>::run(args, rest...);
  if (args.norm_weight != nullptr) {
    if (f32_out) return Launch<T, float, Input::kRmsNorm, false>::run(args, rest...);
    return Launch<T, T, Input::kRmsNorm, false>::run(args, rest...);
  }
  if (f32_out) return Launch<T, float, Input::kX, false>::run(args, rest...);
  Launch<T, T, Input::kX, false>::run(args, rest...);
}
template <template <typename, typename, Input, bool> class Launch, typename... Rest>
void dispatch_gemv(const GemvArgs& args, Rest... rest) {
  if (args.in_dtype == DType::kBF16) return dispatch_inputs<Launch, __nv_bfloat16>(args, rest...);
  dispatch_inputs<Launch, __half>(args, rest...);
}

}  // namespace nanovllm::cuda::gemv_detail
