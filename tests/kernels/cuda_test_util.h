// Helpers for the CUDA op tests: every CUDA op is compared with the CPU op on the same random
// inputs. Device tensors are made from host f32 data rounded to the compute dtype, outputs are
// poisoned (NaN) before each run so an unwritten element fails, and errors are measured as
// ||actual - expected|| / ||expected|| with a bound per dtype.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "kernels/backend.h"

namespace nanovllm::test {

// Skips the test (reported as skipped by ctest) on a machine without a usable CUDA device.
#define NVLLM_REQUIRE_CUDA()                                             \
  do {                                                                   \
    if (!::nanovllm::cuda_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

// Bound on the relative L2 error of a CUDA op against the fp32 CPU op, by compute dtype.
inline double relative_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 1e-5;
    case DType::kBF16:
      return 1.6e-2;
    case DType::kF16:
      return 2e-3;
    default:
      return 0.0;
  }
}

// Rounds host f32 values to `dtype` (bf16/f16 round to nearest even) and back, so the CPU
// reference sees exactly the values the device holds.
inline std::vector<float> round_to(DType dtype, std::vector<float> values) {
  for (float& v : values) {
    if (dtype == DType::kBF16) v = bf16_to_float(float_to_bf16(v));
    if (dtype == DType::kF16) v = fp16_to_float(float_to_fp16(v));
  }
  return values;
}

// A device tensor of `dtype` holding `values` (f32 host data converted; i32 taken as is).
struct DeviceTensor {
  OwnedTensor owned;

  DeviceTensor(Backend& backend, DType dtype, std::initializer_list<int64_t> shape)
      : owned(dtype, shape, backend.device()) {}

  Tensor& tensor() { return owned.tensor; }
};

inline DeviceTensor upload_floats(Backend& backend, DType dtype,
                                  std::initializer_list<int64_t> shape,
                                  const std::vector<float>& values) {
  DeviceTensor device(backend, dtype, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), device.tensor().numel());
  std::vector<uint16_t> half(values.size());
  switch (dtype) {
    case DType::kF32:
      backend.upload(device.tensor(), values.data());
      break;
    case DType::kBF16:
      for (size_t i = 0; i < values.size(); ++i) half[i] = float_to_bf16(values[i]);
      backend.upload(device.tensor(), half.data());
      break;
    case DType::kF16:
      for (size_t i = 0; i < values.size(); ++i) half[i] = float_to_fp16(values[i]);
      backend.upload(device.tensor(), half.data());
      break;
    default:
      ADD_FAILURE() << "upload_floats: not a floating dtype";
  }
  return device;
}

inline DeviceTensor upload_ints(Backend& backend, std::initializer_list<int64_t> shape,
                                const std::vector<int32_t>& values) {
  DeviceTensor device(backend, DType::kI32, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), device.tensor().numel());
  backend.upload(device.tensor(), values.data());
  return device;
}

// Downloads a floating device tensor as f32.
inline std::vector<float> download_floats(Backend& backend, const Tensor& tensor) {
  const size_t n = static_cast<size_t>(tensor.numel());
  std::vector<float> out(n);
  if (tensor.dtype() == DType::kF32) {
    backend.download(out.data(), tensor);
    return out;
  }
  std::vector<uint16_t> half(n);
  backend.download(half.data(), tensor);
  for (size_t i = 0; i < n; ++i) {
    out[i] = tensor.dtype() == DType::kBF16 ? bf16_to_float(half[i]) : fp16_to_float(half[i]);
  }
  return out;
}

// Fills a floating device tensor with NaN.
inline void poison(Backend& backend, const Tensor& tensor) {
  std::vector<float> nans(static_cast<size_t>(tensor.numel()),
                          std::numeric_limits<float>::quiet_NaN());
  std::vector<uint16_t> half(nans.size(), tensor.dtype() == DType::kBF16 ? 0x7fc0 : 0x7e00);
  backend.upload(tensor, tensor.dtype() == DType::kF32 ? static_cast<const void*>(nans.data())
                                                       : static_cast<const void*>(half.data()));
}

inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

// ||actual - expected|| / ||expected|| must be <= tolerance; any NaN fails.
inline void expect_relative_error(const std::vector<float>& actual,
                                  const std::vector<float>& expected, double tolerance,
                                  const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double diff = 0.0, norm = 0.0;
  size_t nan_at = actual.size();
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(actual[i]) && nan_at == actual.size()) nan_at = i;
    const double d = static_cast<double>(actual[i]) - expected[i];
    diff += d * d;
    norm += static_cast<double>(expected[i]) * expected[i];
  }
  ASSERT_EQ(nan_at, actual.size()) << what << ": NaN (unwritten?) at element " << nan_at;
  const double error = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
  EXPECT_LE(error, tolerance) << what << ": relative L2 error " << error;
}

// A host f32 tensor holding `values`: an operand of the CPU backend.
inline OwnedTensor host_floats(std::initializer_list<int64_t> shape,
                               const std::vector<float>& values) {
  OwnedTensor owned(DType::kF32, shape);
  EXPECT_EQ(owned.tensor.numel(), static_cast<int64_t>(values.size()));
  std::copy(values.begin(), values.end(), owned.tensor.data_as<float>());
  return owned;
}

inline OwnedTensor host_ints(std::initializer_list<int64_t> shape,
                             const std::vector<int32_t>& values) {
  OwnedTensor owned(DType::kI32, shape);
  EXPECT_EQ(owned.tensor.numel(), static_cast<int64_t>(values.size()));
  std::copy(values.begin(), values.end(), owned.tensor.data_as<int32_t>());
  return owned;
}

// Writes host f32 values into an existing device tensor, converted to its dtype.
inline void upload_into(Backend& backend, const Tensor& tensor, const std::vector<float>& values) {
  ASSERT_EQ(tensor.numel(), static_cast<int64_t>(values.size()));
  if (tensor.dtype() == DType::kF32) {
    backend.upload(tensor, values.data());
    return;
  }
  std::vector<uint16_t> half(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    half[i] = tensor.dtype() == DType::kBF16 ? float_to_bf16(values[i]) : float_to_fp16(values[i]);
  }
  backend.upload(tensor, half.data());
}

inline std::vector<float> values_of(const Tensor& host) {
  const float* data = host.data_as<float>();
  return std::vector<float>(data, data + host.numel());
}

// HF's rotary table for `head_dim`: cos in the first half of a row, sin in the second.
inline std::vector<float> rotary_table(int max_positions, int head_dim) {
  const int half = head_dim / 2;
  std::vector<float> table(static_cast<size_t>(max_positions) * head_dim);
  for (int p = 0; p < max_positions; ++p) {
    for (int i = 0; i < half; ++i) {
      const double angle = p / std::pow(10000.0, 2.0 * i / head_dim);
      table[static_cast<size_t>(p) * head_dim + i] = static_cast<float>(std::cos(angle));
      table[static_cast<size_t>(p) * head_dim + half + i] = static_cast<float>(std::sin(angle));
    }
  }
  return table;
}

inline const char* dtype_label(DType dtype) {
  return dtype == DType::kF32 ? "f32" : dtype == DType::kBF16 ? "bf16" : "f16";
}

// A test of CUDA ops against the CPU ops, one instance per compute dtype: both backends, a
// seeded generator, inputs rounded to the dtype and failure labels that name it.
class CudaAgainstCpuTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    NVLLM_REQUIRE_CUDA();
    gpu_ = make_cuda_backend(GetParam());
    cpu_ = make_cpu_backend(cpu_threads_);
  }

  DType dtype() const { return GetParam(); }
  double tolerance() const { return relative_tolerance(dtype()); }
  // "what" followed by the dtype, for failure messages.
  template <typename... Args>
  std::string label(fmt::format_string<Args...> what, Args&&... args) const {
    return fmt::format("{} {}", fmt::format(what, std::forward<Args>(args)...),
                       dtype_label(dtype()));
  }
  // Random values already rounded to the compute dtype, so both backends see the same inputs.
  std::vector<float> random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    return round_to(dtype(), random_floats(n, rng_, lo, hi));
  }

  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<Backend> cpu_;
  std::mt19937 rng_{20240611};
  int cpu_threads_ = 0;  // the CPU backend's pool (0: one thread per core)
};

}  // namespace nanovllm::test
