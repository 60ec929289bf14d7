#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"
#include "kernels/cpu/vec.h"

namespace nanovllm::cpu {

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out, ThreadPool& pool) {
  check_tensor(x, "rms_norm x", DType::kF32, 2);
  const int64_t rows = x.size(0);
  const int64_t hidden = x.size(1);
  check_shape(weight, "rms_norm weight", DType::kF32, {hidden});
  check_shape(out, "rms_norm out", DType::kF32, {rows, hidden});

  const float* src = x.data_as<float>();
  const float* w = weight.data_as<float>();
  float* dst = out.data_as<float>();
  pool.parallel_for(rows, hidden, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in_row = src + r * hidden;
      float* out_row = dst + r * hidden;  // may alias in_row: the sum is taken before any write
      const float mean_square = sum_of_squares(in_row, hidden) / static_cast<float>(hidden);
      const float inv_rms = 1.0f / std::sqrt(mean_square + eps);
      for (int64_t i = 0; i < hidden; ++i) out_row[i] = (in_row[i] * inv_rms) * w[i];
    }
  });
}

}  // namespace nanovllm::cpu
