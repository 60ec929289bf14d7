#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"
#include "kernels/backend.h"

namespace nanovllm {
namespace {

using test::expect_close;
using test::random_tensor;

// x / sqrt(mean(x^2) + eps) * w, row by row, in double.
std::vector<double> reference_rms_norm(const std::vector<double>& x, const float* w, int64_t rows,
                                       int64_t hidden, double eps) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t i = 0; i < hidden; ++i) sum += x[r * hidden + i] * x[r * hidden + i];
    const double inv = 1.0 / std::sqrt(sum / hidden + eps);
    for (int64_t i = 0; i < hidden; ++i) out[r * hidden + i] = x[r * hidden + i] * inv * w[i];
  }
  return out;
}

std::vector<double> as_double(const Tensor& t) {
  const float* data = t.data_as<float>();
  return std::vector<double>(data, data + t.numel());
}

TEST(RmsNorm, MatchesReference) {
  std::mt19937 rng(10);
  auto backend = make_cpu_backend(2);
  for (int64_t rows : {1, 3, 17}) {
    for (int64_t hidden : {5, 33, 64, 1027}) {
      OwnedTensor x = random_tensor({rows, hidden}, rng, -3.0f, 3.0f);
      OwnedTensor w = random_tensor({hidden}, rng, 0.5f, 1.5f);
      OwnedTensor out(DType::kF32, {rows, hidden});
      backend->rms_norm(x.tensor, w.tensor, 1e-6f, out.tensor);
      const auto expected =
          reference_rms_norm(as_double(x.tensor), w.tensor.data_as<float>(), rows, hidden, 1e-6);
      expect_close(out.tensor, expected, 1e-5, 1e-6, "rms_norm");

      // In place (out == x) gives the same result.
      backend->rms_norm(x.tensor, w.tensor, 1e-6f, x.tensor);
      expect_close(x.tensor, expected, 1e-5, 1e-6, "rms_norm in place");
    }
  }
}

TEST(RmsNorm, EpsilonMattersForSmallRows) {
  auto backend = make_cpu_backend(1);
  OwnedTensor x(DType::kF32, {1, 4});
  OwnedTensor w(DType::kF32, {4});
  OwnedTensor out(DType::kF32, {1, 4});
  for (int i = 0; i < 4; ++i) {
    x.tensor.data_as<float>()[i] = 1e-3f;
    w.tensor.data_as<float>()[i] = 1.0f;
  }
  backend->rms_norm(x.tensor, w.tensor, 1e-6f, out.tensor);
  // 1e-3 / sqrt(1e-6 + 1e-6)
  EXPECT_NEAR(out.tensor.data_as<float>()[0], 1e-3 / std::sqrt(2e-6), 1e-5);
}

TEST(AddRmsNorm, AddsIntoResidualThenNormalizes) {
  std::mt19937 rng(11);
  auto backend = make_cpu_backend(2);
  for (int64_t rows : {1, 3, 17}) {
    for (int64_t hidden : {5, 64, 257}) {
      OwnedTensor x = random_tensor({rows, hidden}, rng, -2.0f, 2.0f);
      OwnedTensor residual = random_tensor({rows, hidden}, rng, -2.0f, 2.0f);
      OwnedTensor w = random_tensor({hidden}, rng, 0.5f, 1.5f);
      std::vector<double> sum = as_double(x.tensor);
      const std::vector<double> old_residual = as_double(residual.tensor);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += old_residual[i];
      const auto expected_x =
          reference_rms_norm(sum, w.tensor.data_as<float>(), rows, hidden, 1e-6);

      backend->add_rms_norm(x.tensor, residual.tensor, w.tensor, 1e-6f);
      expect_close(residual.tensor, sum, 1e-6, 1e-7, "add_rms_norm residual");
      expect_close(x.tensor, expected_x, 1e-5, 1e-6, "add_rms_norm x");
    }
  }
}

TEST(AddRmsNorm, RejectsBadShapes) {
  auto backend = make_cpu_backend(1);
  OwnedTensor x(DType::kF32, {3, 8});
  OwnedTensor residual(DType::kF32, {2, 8});
  OwnedTensor w(DType::kF32, {8});
  OwnedTensor w_bad(DType::kF32, {7});
  EXPECT_THROW(backend->add_rms_norm(x.tensor, residual.tensor, w.tensor, 1e-6f), Error);
  EXPECT_THROW(backend->add_rms_norm(x.tensor, x.tensor, w.tensor, 1e-6f), Error);
  EXPECT_THROW(backend->rms_norm(x.tensor, w_bad.tensor, 1e-6f, x.tensor), Error);
}

}  // namespace
}  // namespace nanovllm
