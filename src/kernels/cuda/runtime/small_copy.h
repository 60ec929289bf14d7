// Copies of a few bytes between device memory and mapped page-locked host memory, done by a
// kernel rather than the copy engine. A decode step sends its inputs up and its sampled tokens
// down, a few hundred bytes each way; a copy-engine transfer costs several microseconds of
// fixed latency between the kernels around it on the stream, a kernel about one (a PCIe round
// trip for reads from the host), and it can start early behind the kernel before (launch.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace nanovllm::cuda {

// The largest copy small_copy() is meant for; above it the copy engine's bandwidth wins.
inline constexpr size_t kSmallCopyMaxBytes = size_t{64} << 10;

// Enqueues a copy of `bytes` from `src` to `dst` on `stream`. Both are addresses the device can
// read or write: device memory, or page-locked host memory through its device pointer
// (cudaPointerAttributes::devicePointer). Any alignment.
void small_copy(void* dst, const void* src, size_t bytes, cudaStream_t stream);

}  // namespace nanovllm::cuda
