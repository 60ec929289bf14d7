// The tensor-core step of the GEMVs (a few rows of x against many weight rows): one
// m16n8k16 MMA whose A rows 8..15 are zero, so x rows fill A rows 0..7 and 8 weight rows the
// B columns.
#pragma once

#include <cstdint>

#include "kernels/cuda/device/tensor_core.cuh"

namespace nanovllm::cuda {

// d += A @ B for m16n8k16 with A rows 8..15 zero: a0 holds A (g, 2t..2t+1), a2 holds
// A (g, 2t+8..2t+9); b0 holds B (2t..2t+1, g), b1 holds B (2t+8..2t+9, g).
template <typename T>
__device__ __forceinline__ void mma_top_rows(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0,
                                             uint32_t b1) {
  const uint32_t a[4] = {a0, 0u, a2, 0u};
  MmaType<T>::mma(d, a, b0, b1);
}

}  // namespace nanovllm::cuda
