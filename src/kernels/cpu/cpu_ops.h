// The CPU implementations of the Backend ops (fp32), one per file. Each validates its arguments
// before any work starts (worker threads must not throw), then splits the work over the pool.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/thread_pool.h"

namespace nanovllm::cpu {

void embedding(const Tensor& ids, const Tensor& weight, int64_t first_id, Tensor out,
               ThreadPool& pool);
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
void gather_ids(const Tensor& ids, const Tensor& indices, Tensor out);
void moe_route(const Tensor& logits, int top_k, bool normalize, Tensor weights, Tensor ids,
               ThreadPool& pool);
void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                 const Tensor& down, Tensor out, ThreadPool& pool);
// x[r, :] += bias.  x f32 [R, N]; bias f32 [N]
void add_bias(Tensor x, const Tensor& bias);
// out = x, both f32 [R, C] (an all-gather over one rank).
void copy_rows(const Tensor& x, Tensor out);

void sample(const Tensor& logits, const SamplingTensors& params, Tensor token_ids,
            ThreadPool& pool);
void compute_logprobs(const Tensor& logits, const Tensor& token_ids, int num_top,
                      const LogprobsTensors& out, ThreadPool& pool);

// The row functions behind sample and compute_logprobs (also the engine's host sampler).
// 1 to sampling::kMaxVocabulary tokens.
void check_sampling_vocabulary(int64_t vocab);
// 0 to SamplingParams::kMaxLogprobs top entries, and no more than the vocabulary.
void check_logprobs_count(int num_top, int64_t vocab);

struct RowSamplingParams {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int32_t position = 0;  // index in the sequence of the token being sampled
};

// The token kernels/sampling_math.h's rule draws from logits[vocab]; -1 when all are NaN.
// `scratch` is reused across calls.
int32_t sample_row(const float* logits, int64_t vocab, const RowSamplingParams& params,
                   std::vector<uint64_t>& scratch);

struct RowLogprobs {
  float logprob =
      std::numeric_limits<float>::quiet_NaN();  // NaN for a token outside the vocabulary
  int32_t rank = 0;                             // 0 for a token outside the vocabulary
};

// log_softmax (in double) of logits[vocab] at `token`, its rank (1 + number of strictly larger
// logits), and the num_top most likely tokens (rank-key order: lowest id first on ties) into
// top_ids / top_logprobs[num_top].
RowLogprobs logprobs_row(const float* logits, int64_t vocab, int32_t token, int num_top,
                         int32_t* top_ids, float* top_logprobs, std::vector<uint64_t>& scratch);

}  // namespace nanovllm::cpu
