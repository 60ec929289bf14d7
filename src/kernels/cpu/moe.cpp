// The mixture-of-experts ops in fp32: each row routed and pushed through its experts alone,
// the plain reference the GPU's grouped kernels are tested against.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"

namespace nanovllm::cpu {

void moe_route(const Tensor& logits, int top_k, bool normalize, Tensor weights, Tensor ids,
               ThreadPool& pool) {
  check_tensor(logits, "moe_route logits", DType::kF32, 2);
  const int64_t rows = logits.size(0);
  const int64_t experts = logits.size(1);
  NVLLM_CHECK_MSG(top_k >= 1 && top_k <= experts, "moe_route: top_k {} outside [1, {}]", top_k,
                  experts);
  check_shape(weights, "moe_route weights", DType::kF32, {rows, top_k});
  check_shape(ids, "moe_route ids", DType::kI32, {rows, top_k});

  const float* src = logits.data_as<float>();
  float* weight_out = weights.data_as<float>();
  int32_t* id_out = ids.data_as<int32_t>();
  pool.parallel_for(rows, experts * 4, [&](int64_t begin, int64_t end) {
    std::vector<float> probs(experts);
    std::vector<int32_t> order(experts);
    for (int64_t r = begin; r < end; ++r) {
      const float* row = src + r * experts;
      const float max = *std::max_element(row, row + experts);
      float sum = 0.0f;
      for (int64_t e = 0; e < experts; ++e) sum += probs[e] = std::exp(row[e] - max);
      for (float& p : probs) p /= sum;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                        [&](int32_t a, int32_t b) {
                          return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
                        });
      float chosen = 0.0f;
      for (int j = 0; j < top_k; ++j) chosen += probs[order[j]];
      for (int j = 0; j < top_k; ++j) {
        id_out[r * top_k + j] = order[j];
        weight_out[r * top_k + j] = normalize ? probs[order[j]] / chosen : probs[order[j]];
      }
    }
  });
}

void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& gate_up,
                 const Tensor& down, Tensor out, ThreadPool& pool) {
  check_tensor(x, "moe_experts x", DType::kF32, 2);
  const int64_t rows = x.size(0);
  const int64_t hidden = x.size(1);
  check_tensor(ids, "moe_experts ids", DType::kI32, 2);
  const int64_t top_k = ids.size(1);
  check_shape(ids, "moe_experts ids", DType::kI32, {rows, top_k});
  check_shape(weights, "moe_experts weights", DType::kF32, {rows, top_k});
  check_tensor(gate_up, "moe_experts gate_up", DType::kF32, 3);
  const int64_t experts = gate_up.size(0);
  NVLLM_CHECK_MSG(gate_up.size(1) % 2 == 0 && gate_up.size(2) == hidden,
                  "moe_experts gate_up {} is not [experts, 2 * intermediate, {}]",
                  gate_up.shape_string(), hidden);
  const int64_t inter = gate_up.size(1) / 2;
  check_shape(down, "moe_experts down", DType::kF32, {experts, hidden, inter});
  check_shape(out, "moe_experts out", DType::kF32, {rows, hidden});
  const int32_t* id_data = ids.data_as<int32_t>();
  for (int64_t i = 0; i < rows * top_k; ++i) {
    NVLLM_CHECK_MSG(id_data[i] >= 0 && id_data[i] < experts,
                    "moe_experts: row {} routes to expert {}, outside [0, {})", i / top_k,
                    id_data[i], experts);
  }

  const float* x_data = x.data_as<float>();
  const float* weight_data = weights.data_as<float>();
  const float* gate_up_data = gate_up.data_as<float>();
  const float* down_data = down.data_as<float>();
  float* out_data = out.data_as<float>();
  // Each row reads its own x row only and is written once done with it: out may be x.
  pool.parallel_for(rows, top_k * 3 * inter * hidden, [&](int64_t begin, int64_t end) {
    std::vector<float> act(inter);
    std::vector<float> sum(hidden);
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x_data + r * hidden;
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (int64_t j = 0; j < top_k; ++j) {
        const int64_t expert = id_data[r * top_k + j];
        const float* w_gate = gate_up_data + expert * 2 * inter * hidden;
        const float* w_up = w_gate + inter * hidden;
        for (int64_t i = 0; i < inter; ++i) {
          const float gate = std::inner_product(row, row + hidden, w_gate + i * hidden, 0.0f);
          const float up = std::inner_product(row, row + hidden, w_up + i * hidden, 0.0f);
          act[i] = gate / (1.0f + std::exp(-gate)) * up;
        }
        const float* w_down = down_data + expert * hidden * inter;
        const float weight = weight_data[r * top_k + j];
        for (int64_t h = 0; h < hidden; ++h) {
          sum[h] += weight * std::inner_product(act.begin(), act.end(), w_down + h * inter, 0.0f);
        }
      }
      std::copy(sum.begin(), sum.end(), out_data + r * hidden);
    }
  });
}

}  // namespace nanovllm::cpu
