#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"

namespace nanovllm::cpu {

void silu_mul(const Tensor& gate_up, Tensor out, ThreadPool& pool) {
  check_tensor(gate_up, "silu_mul gate_up", DType::kF32, 2);
  const int64_t rows = gate_up.size(0);
  NVLLM_CHECK_MSG(gate_up.size(1) % 2 == 0, "silu_mul gate_up {} has an odd width",
                  gate_up.shape_string());
  const int64_t width = gate_up.size(1) / 2;
  check_shape(out, "silu_mul out", DType::kF32, {rows, width});

  const float* src = gate_up.data_as<float>();
  float* dst = out.data_as<float>();
  pool.parallel_for(rows, width, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* gate = src + r * 2 * width;
      const float* up = gate + width;
      float* out_row = dst + r * width;
      for (int64_t i = 0; i < width; ++i) {
        out_row[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
      }
    }
  });
}

}  // namespace nanovllm::cpu
