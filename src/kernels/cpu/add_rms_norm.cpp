#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"
#include "kernels/cpu/vec.h"

namespace nanovllm::cpu {

void add_rms_norm(Tensor x, Tensor residual, const Tensor& weight, float eps, ThreadPool& pool) {
  check_tensor(x, "add_rms_norm x", DType::kF32, 2);
  const int64_t rows = x.size(0);
  const int64_t hidden = x.size(1);
  check_shape(residual, "add_rms_norm residual", DType::kF32, {rows, hidden});
  check_shape(weight, "add_rms_norm weight", DType::kF32, {hidden});
  NVLLM_CHECK_MSG(x.data() != residual.data(), "add_rms_norm x and residual share storage");

  float* xs = x.data_as<float>();
  float* rs = residual.data_as<float>();
  const float* w = weight.data_as<float>();
  pool.parallel_for(rows, hidden, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* x_row = xs + r * hidden;
      float* res_row = rs + r * hidden;
      for (int64_t i = 0; i < hidden; ++i) res_row[i] += x_row[i];
      const float mean_square = sum_of_squares(res_row, hidden) / static_cast<float>(hidden);
      const float inv_rms = 1.0f / std::sqrt(mean_square + eps);
      for (int64_t i = 0; i < hidden; ++i) x_row[i] = (res_row[i] * inv_rms) * w[i];
    }
  });
}

void add_bias(Tensor x, const Tensor& bias) {
  check_tensor(x, "add_bias x", DType::kF32, 2);
  check_shape(bias, "add_bias bias", DType::kF32, {x.size(1)});
  const float* b = bias.data_as<float>();
  for (int64_t r = 0; r < x.size(0); ++r) {
    float* row = x.data_as<float>() + r * x.stride(0);
    for (int64_t i = 0; i < x.size(1); ++i) row[i] += b[i];
  }
}

}  // namespace nanovllm::cpu
