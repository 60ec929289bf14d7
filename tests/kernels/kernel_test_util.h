// Helpers for the op tests: random tensors, int tensors from vectors, and comparisons against
// references computed in double.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/buffer.h"

namespace nanovllm::test {

// Uniform values in [lo, hi) from a seeded generator (tests are reproducible).
inline OwnedTensor random_tensor(std::initializer_list<int64_t> shape, std::mt19937& rng,
                                 float lo = -1.0f, float hi = 1.0f) {
  OwnedTensor owned(DType::kF32, shape);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* data = owned.tensor.data_as<float>();
  for (int64_t i = 0; i < owned.tensor.numel(); ++i) data[i] = dist(rng);
  return owned;
}

inline OwnedTensor int_tensor(const std::vector<int32_t>& values) {
  OwnedTensor owned(DType::kI32, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), owned.tensor.data_as<int32_t>());
  return owned;
}

inline OwnedTensor int_matrix(const std::vector<std::vector<int32_t>>& rows, int64_t columns,
                              int32_t fill) {
  OwnedTensor owned(DType::kI32, {static_cast<int64_t>(rows.size()), columns});
  int32_t* data = owned.tensor.data_as<int32_t>();
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t c = 0; c < columns; ++c) {
      data[r * columns + c] = c < static_cast<int64_t>(rows[r].size()) ? rows[r][c] : fill;
    }
  }
  return owned;
}

inline std::vector<float> to_vector(const Tensor& tensor) {
  const float* data = tensor.data_as<float>();
  return std::vector<float>(data, data + tensor.numel());
}

// Every |actual - expected| <= atol + rtol * |expected|; reports the worst element.
inline void expect_close(const float* actual, const std::vector<double>& expected, double rtol,
                         double atol, const std::string& what) {
  double worst_excess = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double error = std::abs(static_cast<double>(actual[i]) - expected[i]);
    const double excess = error - (atol + rtol * std::abs(expected[i]));
    if (!(excess <= worst_excess)) {  // NaN counts as a failure
      worst_excess = std::isnan(error) ? INFINITY : excess;
      worst = i;
    }
  }
  EXPECT_LE(worst_excess, 0.0) << what << ": element " << worst << " is " << actual[worst]
                               << ", expected " << expected[worst] << " (rtol " << rtol << ", atol "
                               << atol << ")";
}

inline void expect_close(const Tensor& actual, const std::vector<double>& expected, double rtol,
                         double atol, const std::string& what) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size())) << what;
  expect_close(actual.data_as<float>(), expected, rtol, atol, what);
}

}  // namespace nanovllm::test
