// out = x @ weight^T (+ bias) on cuBLASLt with fp32 accumulation. The algorithm for each shape,
// dtype, leading-dimension and pointer-alignment combination is chosen once by cuBLASLt's heuristic
// and cached; the workspace is allocated once up front, so calls allocate nothing and can be
// captured in a CUDA graph.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "core/buffer.h"
#include "core/dtype.h"

namespace nanovllm::cuda {

// Row-major operands, rows `ld*` elements apart (the last dimension is contiguous).
struct LinearArgs {
  DType in_dtype = DType::kBF16;   // of x and weight: f32, bf16 or f16
  DType out_dtype = DType::kBF16;  // in_dtype, or f32 for bf16/f16 inputs (the logits)
  const void* x = nullptr;         // [m, k]
  int64_t ldx = 0;
  const void* weight = nullptr;  // [n, k]
  int64_t ldw = 0;
  void* out = nullptr;  // [m, n]; must not overlap x or weight
  int64_t ldo = 0;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  // Optional: [n], 16-byte aligned, with out_dtype == in_dtype, added to the fp32 sums before
  // they are rounded (cuBLASLt's bias epilogue; the GEMV's own at a few rows).
  const void* bias = nullptr;
};

class CublasLtLinear {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  // Creates the cuBLASLt handle and allocates the workspace (a CUDA buffer: the CUDA allocator
  // must be registered).
  CublasLtLinear();
  ~CublasLtLinear();
  CublasLtLinear(const CublasLtLinear&) = delete;
  CublasLtLinear& operator=(const CublasLtLinear&) = delete;

  void run(const LinearArgs& args, cudaStream_t stream);

 private:
  // Everything the heuristic's choice depends on.
  struct PlanKey {
    DType in_dtype;
    DType out_dtype;
    int64_t m, n, k;
    int64_t ldx, ldw, ldo;
    uint32_t align_x, align_w, align_out;  // bytes, powers of two up to 256
    bool bias;

    auto operator<=>(const PlanKey&) const = default;
  };
  struct Plan;  // descriptors and the chosen algorithm

  const Plan& plan_for(const PlanKey& key);

  Buffer workspace_;
  cublasLtHandle_t handle_ = nullptr;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

}  // namespace nanovllm::cuda
