// The GEMV at one row for weights of many tiles: persistent CTAs that stream their share of the
// weight without a break between tiles (gemv_row.cu). gemv() takes it where it serves.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/linear/gemv.h"

namespace nanovllm::cuda {

// Weights from this size up take the persistent kernel at one row.
inline constexpr int64_t kGemvRowMinWeightBytes = int64_t{16} << 20;

// Whether gemv_row() serves `args` (and gemv() takes it): gemv_supported(args), one row, no
// pending sum, k at least 2,048, a weight of at least kGemvRowMinWeightBytes and the input row
// staged in shared memory beside the weight's ring. Below that the kernel of a CTA a tile is as
// fast or faster: its CTAs are few enough to run in a wave or two beside the kernels around
// them, or small enough (k below 2,048) to fit many an SM (docs/BENCHMARKS.md).
bool gemv_row_serves(const GemvArgs& args);

// Enqueues the persistent kernel on `stream`; `args` must satisfy gemv_row_serves().
void gemv_row(const GemvArgs& args, cudaStream_t stream);

}  // namespace nanovllm::cuda
