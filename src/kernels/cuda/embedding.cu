// Embedding lookup: one block per token copies its weight row.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_ops.h"
#include "kernels/cuda/vec.cuh"

namespace nanovllm::cuda {
namespace {

template <typename T, int kWidth>
__global__ void embedding_kernel(const int32_t* ids, const T* weight, int64_t vocab, int64_t hidden,
                                 T* out, int64_t out_stride) {
  const int64_t token = blockIdx.x;
  const int32_t id = ids[token];
  // A kernel cannot throw: an out-of-range id gets a zero row instead of a wild read.
  const bool valid = id >= 0 && id < vocab;
  const T* src = weight + (valid ? static_cast<int64_t>(id) : 0) * hidden;
  T* dst = out + token * out_stride;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kWidth; i < hidden;
       i += static_cast<int64_t>(blockDim.x) * kWidth) {
    if (valid) {
      copy_elements<T, kWidth>(src + i, dst + i);
    } else {
      zero_elements<T, kWidth>(dst + i);
    }
  }
}

}  // namespace

void embedding(DType dtype, const int32_t* ids, int64_t tokens, const void* weight, int64_t vocab,
               int64_t hidden, void* out, int64_t out_stride, cudaStream_t stream) {
  if (tokens == 0 || hidden == 0) return;
  NVLLM_CHECK_LE(tokens, int64_t{INT32_MAX});
  dispatch_float_dtype(dtype, "embedding", [&](auto tag) {
    using T = decltype(tag);
    const T* w = static_cast<const T*>(weight);
    T* o = static_cast<T*>(out);
    if (vectorizable<T>({weight, out}, {hidden, out_stride})) {
      constexpr int kWidth = kVecWidth<T>;
      embedding_kernel<T, kWidth>
          <<<static_cast<unsigned>(tokens), threads_for(hidden / kWidth), 0, stream>>>(
              ids, w, vocab, hidden, o, out_stride);
    } else {
      embedding_kernel<T, 1><<<static_cast<unsigned>(tokens), threads_for(hidden), 0, stream>>>(
          ids, w, vocab, hidden, o, out_stride);
    }
    NVLLM_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace nanovllm::cuda
