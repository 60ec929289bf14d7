#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "kernel_test_util.h"
#include "kernels/backend.h"

namespace nanovllm {
namespace {

using test::random_tensor;

// Checks out = x @ w^T against a double-accumulated reference. fp32 accumulation error grows
// with the terms summed, so the tolerance is relative to sum_k |x[m,k] * w[n,k]|.
void check_linear(Backend& backend, int64_t m, int64_t k, int64_t n, std::mt19937& rng) {
  OwnedTensor x = random_tensor({m, k}, rng);
  OwnedTensor w = random_tensor({n, k}, rng);
  OwnedTensor out(DType::kF32, {m, n});
  backend.linear(x.tensor, w.tensor, out.tensor);

  const float* xs = x.tensor.data_as<float>();
  const float* ws = w.tensor.data_as<float>();
  const float* os = out.tensor.data_as<float>();
  int failures = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      double magnitude = 0.0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double product = static_cast<double>(xs[i * k + kk]) * ws[j * k + kk];
        sum += product;
        magnitude += std::abs(product);
      }
      const double error = std::abs(os[i * n + j] - sum);
      if (!(error <= 1e-5 * magnitude + 1e-30) && failures++ < 3) {
        ADD_FAILURE() << "M=" << m << " K=" << k << " N=" << n << " out[" << i << "," << j
                      << "] = " << os[i * n + j] << ", expected " << sum;
      }
    }
  }
}

TEST(Linear, MatchesReferenceOnOddSizes) {
  std::mt19937 rng(1);
  for (int threads : {1, 3}) {
    auto backend = make_cpu_backend(threads);
    for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 17, 97}) {
      for (int64_t k : {1, 33, 127, 256, 300}) {
        for (int64_t n : {5, 16, 257}) check_linear(*backend, m, k, n, rng);
      }
    }
  }
}

TEST(Linear, MatchesReferenceAcrossSeveralPanelsAndBlocks) {
  std::mt19937 rng(2);
  auto backend = make_cpu_backend(2);
  check_linear(*backend, 200, 600, 300, rng);
  check_linear(*backend, 1, 1100, 700, rng);
}

TEST(Linear, EmptyDepthGivesZeros) {
  auto backend = make_cpu_backend(1);
  OwnedTensor x(DType::kF32, {3, 0});
  OwnedTensor w(DType::kF32, {4, 0});
  OwnedTensor out(DType::kF32, {3, 4});
  std::fill(out.tensor.data_as<float>(), out.tensor.data_as<float>() + 12, 7.0f);
  backend->linear(x.tensor, w.tensor, out.tensor);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out.tensor.data_as<float>()[i], 0.0f);
}

TEST(Linear, RejectsMismatchedShapesAndDtypes) {
  std::mt19937 rng(3);
  auto backend = make_cpu_backend(1);
  OwnedTensor x = random_tensor({3, 33}, rng);
  OwnedTensor w = random_tensor({5, 32}, rng);
  OwnedTensor w_ok = random_tensor({5, 33}, rng);
  OwnedTensor out(DType::kF32, {3, 5});
  OwnedTensor out_bad(DType::kF32, {3, 6});
  OwnedTensor ints(DType::kI32, {3, 33});
  EXPECT_THROW(backend->linear(x.tensor, w.tensor, out.tensor), Error);
  EXPECT_THROW(backend->linear(x.tensor, w_ok.tensor, out_bad.tensor), Error);
  EXPECT_THROW(backend->linear(ints.tensor, w_ok.tensor, out.tensor), Error);
  EXPECT_THROW(backend->linear(x.tensor.slice_last(0, 32), w.tensor, out.tensor), Error);
  try {
    backend->linear(x.tensor, w.tensor, out.tensor);
  } catch (const Error& error) {
    // The message shows both the given and the expected size.
    EXPECT_NE(std::string(error.what()).find("32"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("33"), std::string::npos) << error.what();
  }
}

double seconds_per_call(Backend& backend, const Tensor& x, const Tensor& w, Tensor out) {
  backend.linear(x, w, out);  // warm-up: packing buffers, page faults
  int calls = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0.0;
  do {
    backend.linear(x, w, out);
    ++calls;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < 0.5);
  return elapsed / calls;
}

// Prints (does not assert) fp32 GEMM throughput; the machine's load makes timings noisy.
TEST(Linear, Throughput) {
  std::mt19937 rng(4);
  auto backend = make_cpu_backend(0);
  struct Case {
    int64_t m, k, n;
  };
  for (const Case& c :
       {Case{1024, 1024, 1024}, Case{1, 1024, 1024}, Case{1, 1024, 3072}, Case{8, 1024, 3072}}) {
    OwnedTensor x = random_tensor({c.m, c.k}, rng);
    OwnedTensor w = random_tensor({c.n, c.k}, rng);
    OwnedTensor out(DType::kF32, {c.m, c.n});
    const double seconds = seconds_per_call(*backend, x.tensor, w.tensor, out.tensor);
    std::printf("linear M=%lld K=%lld N=%lld: %.3f ms, %.1f GFLOP/s, %.1f GB/s of weights\n",
                static_cast<long long>(c.m), static_cast<long long>(c.k),
                static_cast<long long>(c.n), seconds * 1e3, 2.0 * c.m * c.k * c.n / seconds / 1e9,
                4.0 * c.k * c.n / seconds / 1e9);
  }
}

}  // namespace
}  // namespace nanovllm
