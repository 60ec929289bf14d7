#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"
#include "kernels/cpu/vec.h"

namespace nanovllm::cpu {
namespace {

// RMSNorm of one head (without a norm weight: none), then neox-style rotation of its two
// halves by the position's angles.
void norm_rotate_head(float* head, const float* norm_weight, const float* cos, const float* sin,
                      int head_dim, float eps) {
  if (norm_weight != nullptr) {
    const float mean_square = sum_of_squares(head, head_dim) / static_cast<float>(head_dim);
    const float inv_rms = 1.0f / std::sqrt(mean_square + eps);
    for (int i = 0; i < head_dim; ++i) head[i] = (head[i] * inv_rms) * norm_weight[i];
  }
  const int half = head_dim / 2;
  float* x1 = head;
  float* x2 = head + half;
  for (int i = 0; i < half; ++i) {
    const float a = x1[i];
    const float b = x2[i];
    x1[i] = a * cos[i] - b * sin[i];
    x2[i] = b * cos[i] + a * sin[i];
  }
}

}  // namespace

void qk_norm_rope(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                  const Tensor& cos_sin, float eps, const AttentionDims& dims, ThreadPool& pool) {
  check_qkv(qkv, dims);
  const int64_t tokens = qkv.size(0);
  const int head_dim = dims.head_dim;
  NVLLM_CHECK_MSG(q_norm.defined() == k_norm.defined(),
                  "q_norm and k_norm are both given (q/k norm) or both not (rotary only)");
  if (q_norm.defined()) {
    check_shape(q_norm, "q_norm", DType::kF32, {head_dim});
    check_shape(k_norm, "k_norm", DType::kF32, {head_dim});
  }
  check_shape(positions, "positions", DType::kI32, {tokens});
  check_shape(cos_sin, "cos_sin", DType::kF32, {-1, head_dim});

  const int64_t max_positions = cos_sin.size(0);
  const int32_t* pos = positions.data_as<int32_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    NVLLM_CHECK_MSG(pos[t] >= 0 && pos[t] < max_positions,
                    "position {} of token {} is outside the rotary table's [0, {})", pos[t], t,
                    max_positions);
  }

  float* rows = qkv.data_as<float>();
  const float* q_weight = q_norm.defined() ? q_norm.data_as<float>() : nullptr;
  const float* k_weight = k_norm.defined() ? k_norm.data_as<float>() : nullptr;
  const float* table = cos_sin.data_as<float>();
  const int64_t row_width = dims.qkv_size();
  const int heads = dims.num_heads + dims.num_kv_heads;  // q heads then k heads, adjacent
  const int64_t work = tokens * heads;
  pool.parallel_for(work, head_dim, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / heads;
      const int h = static_cast<int>(item % heads);
      const float* cos = table + static_cast<int64_t>(pos[t]) * head_dim;
      const float* sin = cos + head_dim / 2;
      float* head = rows + t * row_width + static_cast<int64_t>(h) * head_dim;
      norm_rotate_head(head, h < dims.num_heads ? q_weight : k_weight, cos, sin, head_dim, eps);
    }
  });
}

}  // namespace nanovllm::cpu
