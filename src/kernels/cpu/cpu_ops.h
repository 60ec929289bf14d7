// The CPU implementations of the Backend ops (fp32), one per file. Each validates its arguments
// before any work starts (threads must not throw) and runs on up to num_threads OpenMP threads.
#pragma once

#include "kernels/backend.h"

namespace nanovllm::cpu {

void embedding(const Tensor& ids, const Tensor& weight, Tensor out, int num_threads);
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out, int num_threads);
void add_rms_norm(Tensor x, Tensor residual, const Tensor& weight, float eps, int num_threads);
void linear(const Tensor& x, const Tensor& weight, Tensor out, int num_threads);
void qk_norm_rope(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                  const Tensor& cos_sin, float eps, const AttentionDims& dims, int num_threads);
void store_kv(const Tensor& qkv, const LayerKVCache& cache, const AttentionMetadata& metadata,
              const AttentionDims& dims, int num_threads);
void attention(const Tensor& qkv, const LayerKVCache& cache, const AttentionMetadata& metadata,
               const AttentionDims& dims, float scale, Tensor out, int num_threads);
void silu_mul(const Tensor& gate_up, Tensor out, int num_threads);
void gather_rows(const Tensor& x, const Tensor& indices, Tensor out, int num_threads);

}  // namespace nanovllm::cpu
