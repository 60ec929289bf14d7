// The tensor-core step of the GEMVs (a few rows of x against many weight rows): one
// m16n8k16 MMA whose A rows 8..15 are zero, so x rows fill A rows 0..7 and 8 weight rows the
// B columns.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace nanovllm::cuda {

// d += A @ B for m16n8k16 with A rows 8..15 zero: a0 holds A (g, 2t..2t+1), a2 holds
// A (g, 2t+8..2t+9); b0 holds B (2t..2t+1, g), b1 holds B (2t+8..2t+9, g).
template <typename T>
__device__ __forceinline__ void mma_top_rows(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0,
                                             uint32_t b1);
template <>
__device__ __forceinline__ void mma_top_rows<__nv_bfloat16>(float (&d)[4], uint32_t a0, uint32_t a2,
                                                            uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_top_rows<__half>(float (&d)[4], uint32_t a0, uint32_t a2,
                                                     uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

}  // namespace nanovllm::cuda
