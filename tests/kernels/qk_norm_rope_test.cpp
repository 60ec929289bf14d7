#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"
#include "kernels/backend.h"

namespace nanovllm {
namespace {

using test::expect_close;
using test::int_tensor;
using test::random_tensor;

// A table of random angles: row p = [cos(a_p) | sin(a_p)], each half [head_dim / 2].
OwnedTensor random_cos_sin(int64_t positions, int head_dim, std::mt19937& rng) {
  OwnedTensor table(DType::kF32, {positions, head_dim});
  std::uniform_real_distribution<double> angle(-10.0, 10.0);
  float* data = table.tensor.data_as<float>();
  for (int64_t p = 0; p < positions; ++p) {
    for (int i = 0; i < head_dim / 2; ++i) {
      const double a = angle(rng);
      data[p * head_dim + i] = static_cast<float>(std::cos(a));
      data[p * head_dim + head_dim / 2 + i] = static_cast<float>(std::sin(a));
    }
  }
  return table;
}

// Per head: RMSNorm with weight, then out[i] = x1 c - x2 s, out[i + D/2] = x2 c + x1 s.
void reference_head(const float* in, const float* weight, const float* cos_sin_row, int head_dim,
                    double eps, double* out) {
  double sum = 0.0;
  for (int i = 0; i < head_dim; ++i) sum += static_cast<double>(in[i]) * in[i];
  const double inv = 1.0 / std::sqrt(sum / head_dim + eps);
  std::vector<double> normed(head_dim);
  for (int i = 0; i < head_dim; ++i) normed[i] = in[i] * inv * weight[i];
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double c = cos_sin_row[i];
    const double s = cos_sin_row[half + i];
    out[i] = normed[i] * c - normed[half + i] * s;
    out[half + i] = normed[half + i] * c + normed[i] * s;
  }
}

TEST(QkNormRope, MatchesReferenceAndLeavesValuesAlone) {
  std::mt19937 rng(30);
  auto backend = make_cpu_backend(2);
  for (const AttentionDims dims :
       {AttentionDims{4, 2, 128}, AttentionDims{3, 1, 64}, AttentionDims{2, 2, 6}}) {
    for (int64_t tokens : {1, 5, 17}) {
      const int d = dims.head_dim;
      OwnedTensor qkv = random_tensor({tokens, dims.qkv_size()}, rng, -2.0f, 2.0f);
      OwnedTensor q_norm = random_tensor({d}, rng, 0.5f, 1.5f);
      OwnedTensor k_norm = random_tensor({d}, rng, 0.5f, 1.5f);
      OwnedTensor cos_sin = random_cos_sin(50, d, rng);
      std::vector<int32_t> pos_values(tokens);
      for (auto& p : pos_values) p = static_cast<int32_t>(rng() % 50);
      OwnedTensor positions = int_tensor(pos_values);

      const std::vector<float> before = test::to_vector(qkv.tensor);
      std::vector<double> expected(before.begin(), before.end());
      for (int64_t t = 0; t < tokens; ++t) {
        const float* row = before.data() + t * dims.qkv_size();
        const float* table_row = cos_sin.tensor.data_as<float>() + pos_values[t] * d;
        for (int h = 0; h < dims.num_heads + dims.num_kv_heads; ++h) {
          const float* weight = (h < dims.num_heads ? q_norm : k_norm).tensor.data_as<float>();
          reference_head(row + h * d, weight, table_row, d, 1e-6,
                         expected.data() + t * dims.qkv_size() + h * d);
        }
      }
      backend->qk_norm_rope(qkv.tensor, q_norm.tensor, k_norm.tensor, positions.tensor,
                            cos_sin.tensor, 1e-6f, dims);
      // v heads are compared too: they must come back bit-identical (atol 0 on exact values).
      expect_close(qkv.tensor, expected, 1e-5, 1e-6, "qk_norm_rope");
      for (int64_t t = 0; t < tokens; ++t) {
        for (int i = dims.q_size() + dims.kv_size(); i < dims.qkv_size(); ++i) {
          ASSERT_EQ(qkv.tensor.data_as<float>()[t * dims.qkv_size() + i],
                    before[t * dims.qkv_size() + i]);
        }
      }
    }
  }
}

TEST(QkNormRope, PositionOutsideTheTableIsAnError) {
  std::mt19937 rng(31);
  auto backend = make_cpu_backend(1);
  const AttentionDims dims{2, 1, 8};
  OwnedTensor qkv = random_tensor({2, dims.qkv_size()}, rng);
  OwnedTensor norm = random_tensor({8}, rng);
  OwnedTensor cos_sin = random_cos_sin(10, 8, rng);
  OwnedTensor positions = int_tensor({3, 10});
  EXPECT_THROW(backend->qk_norm_rope(qkv.tensor, norm.tensor, norm.tensor, positions.tensor,
                                     cos_sin.tensor, 1e-6f, dims),
               Error);
  OwnedTensor wrong_width = random_tensor({2, dims.qkv_size() + 1}, rng);
  OwnedTensor ok_positions = int_tensor({3, 9});
  EXPECT_THROW(backend->qk_norm_rope(wrong_width.tensor, norm.tensor, norm.tensor,
                                     ok_positions.tensor, cos_sin.tensor, 1e-6f, dims),
               Error);
}

}  // namespace
}  // namespace nanovllm
