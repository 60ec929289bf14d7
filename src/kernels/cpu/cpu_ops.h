// The CPU implementations of the Backend ops (fp32), one per file. Each validates its arguments
// before any work starts (worker threads must not throw), then splits the work over the pool.
#pragma once

#include "kernels/backend.h"
#include "kernels/cpu/thread_pool.h"

namespace nanovllm::cpu {

void embedding(const Tensor& ids, const Tensor& weight, Tensor out, ThreadPool& pool);
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out, ThreadPool& pool);
void add_rms_norm(Tensor x, Tensor residual, const Tensor& weight, float eps, ThreadPool& pool);
void linear(const Tensor& x, const Tensor& weight, Tensor out, ThreadPool& pool);
void qk_norm_rope(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                  const Tensor& cos_sin, float eps, const AttentionDims& dims, ThreadPool& pool);
void store_kv(const Tensor& qkv, const LayerKVCache& cache, const AttentionMetadata& metadata,
              const AttentionDims& dims, ThreadPool& pool);
void attention(const Tensor& qkv, const LayerKVCache& cache, const AttentionMetadata& metadata,
               const AttentionDims& dims, float scale, Tensor out, ThreadPool& pool);
void silu_mul(const Tensor& gate_up, Tensor out, ThreadPool& pool);
void gather_rows(const Tensor& x, const Tensor& indices, Tensor out, ThreadPool& pool);
// dst[i, :] = src[index[i], :] for rows of `width` floats; indices already checked.
void copy_indexed_rows(const float* src, const int32_t* index, int64_t count, int64_t width,
                       float* dst, ThreadPool& pool);

}  // namespace nanovllm::cpu
