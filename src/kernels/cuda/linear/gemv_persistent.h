// The GEMV for weights of many tiles: persistent CTAs that stream their share of the weight
// without a break between tiles (gemv_persistent.cu). gemv() takes it where it serves.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/linear/gemv.h"

namespace nanovllm::cuda {

// Weights from this size up take the persistent kernel.
inline constexpr int64_t kGemvPersistentMinWeightBytes = int64_t{16} << 20;

// Whether the weight is one the persistent kernel is for: k at least 2,048 and at least
// kGemvPersistentMinWeightBytes.
bool gemv_persistent_weight(const GemvArgs& args);

// Whether gemv_persistent() serves `args` (and gemv() takes it): gemv_supported's checks of
// the operands (with a norm of any width), one row with a norm or SiLU and up to kGemvMaxRows
// without, no pending sum, gemv_persistent_weight() and the input rows staged in shared memory
// beside the weight's ring, of fewer warps where x takes room from it (8 rows up to k of about
// 10,000, 4 up to 20,000, 2 up to 40,000) while its tiles fill at least 90% of their rounds'
// CTA slots (gemv_persistent.cu says why). For smaller weights the kernel of a CTA a tile is
// as fast or faster: its CTAs are few enough to run in a wave or two beside the kernels around
// them, or small enough (k below 2,048) to fit many an SM (docs/BENCHMARKS.md).
bool gemv_persistent_serves(const GemvArgs& args);

// Enqueues the persistent kernel on `stream`; `args` must satisfy gemv_persistent_serves().
void gemv_persistent(const GemvArgs& args, cudaStream_t stream);

}  // namespace nanovllm::cuda
