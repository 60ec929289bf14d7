// The CPU mixture-of-experts ops against their definition written out in double: softmax,
// top-k by probability (the lower id on ties), and each row's experts as dense SwiGLU MLPs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernel_test_util.h"
#include "kernels/backend.h"

namespace nanovllm {
namespace {

using test::expect_close;
using test::random_tensor;

struct Route {
  std::vector<int32_t> ids;  // [T, k]
  std::vector<double> weights;
};

Route reference_route(const Tensor& logits, int top_k, bool normalize) {
  const int64_t rows = logits.size(0);
  const int64_t experts = logits.size(1);
  Route route;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data_as<float>() + r * experts;
    std::vector<double> probs(experts);
    const double max = *std::max_element(row, row + experts);
    for (int64_t e = 0; e < experts; ++e) probs[e] = std::exp(row[e] - max);
    const double sum = std::accumulate(probs.begin(), probs.end(), 0.0);
    std::vector<int32_t> order(experts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
    double chosen = 0.0;
    for (int j = 0; j < top_k; ++j) chosen += probs[order[j]];
    for (int j = 0; j < top_k; ++j) {
      route.ids.push_back(order[j]);
      route.weights.push_back(probs[order[j]] / (normalize ? chosen : sum));
    }
  }
  return route;
}

TEST(MoeRoute, TopExpertsBySoftmaxProbability) {
  std::mt19937 rng(50);
  auto backend = make_cpu_backend(2);
  for (const auto& [rows, experts] :
       {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {33, 60}, {5, 128}}) {
    OwnedTensor logits = random_tensor({rows, experts}, rng, -4.0f, 4.0f);
    for (int top_k : {1, 2, 8}) {
      if (top_k > experts) continue;
      for (bool normalize : {false, true}) {
        OwnedTensor weights(DType::kF32, {rows, top_k});
        OwnedTensor ids(DType::kI32, {rows, top_k});
        backend->moe_route(logits.tensor, top_k, normalize, weights.tensor, ids.tensor);
        const Route expected = reference_route(logits.tensor, top_k, normalize);
        const std::string what = fmt::format("{} rows, {} experts, top {}{}", rows, experts, top_k,
                                             normalize ? ", normalized" : "");
        const int32_t* got = ids.tensor.data_as<int32_t>();
        EXPECT_EQ(std::vector<int32_t>(got, got + rows * top_k), expected.ids) << what;
        expect_close(weights.tensor, expected.weights, 1e-5, 1e-7, what);
      }
    }
  }
}

TEST(MoeRoute, TiesGoToTheLowerIdAndBadArgumentsAreErrors) {
  auto backend = make_cpu_backend(1);
  OwnedTensor logits(DType::kF32, {2, 5});
  const float values[] = {0.5f, 2.0f, 0.5f, 2.0f, 0.5f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  std::copy(std::begin(values), std::end(values), logits.tensor.data_as<float>());
  OwnedTensor weights(DType::kF32, {2, 3});
  OwnedTensor ids(DType::kI32, {2, 3});
  backend->moe_route(logits.tensor, 3, true, weights.tensor, ids.tensor);
  const int32_t* got = ids.tensor.data_as<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(got, got + 6), (std::vector<int32_t>{1, 3, 0, 0, 1, 2}));
  for (int j = 3; j < 6; ++j) EXPECT_FLOAT_EQ(weights.tensor.data_as<float>()[j], 1.0f / 3);
  EXPECT_THROW(backend->moe_route(logits.tensor, 6, true, weights.tensor, ids.tensor), Error);
  EXPECT_THROW(backend->moe_route(logits.tensor, 0, true, weights.tensor, ids.tensor), Error);
}

// out[t] = sum_j w[t, j] * down_e @ (silu(gate_e @ x[t]) * (up_e @ x[t])), e = ids[t, j].
std::vector<double> reference_experts(const Tensor& x, const std::vector<int32_t>& ids,
                                      const std::vector<float>& weights, const Tensor& gate_up,
                                      const Tensor& down) {
  const int64_t rows = x.size(0);
  const int64_t hidden = x.size(1);
  const int64_t inter = down.size(2);
  const int64_t top_k = static_cast<int64_t>(ids.size()) / rows;
  std::vector<double> out(rows * hidden, 0.0);
  for (int64_t t = 0; t < rows; ++t) {
    const float* row = x.data_as<float>() + t * hidden;
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t e = ids[t * top_k + j];
      const float* w_gate = gate_up.data_as<float>() + e * 2 * inter * hidden;
      const float* w_up = w_gate + inter * hidden;
      const float* w_down = down.data_as<float>() + e * hidden * inter;
      std::vector<double> act(inter);
      for (int64_t i = 0; i < inter; ++i) {
        double gate = 0.0, up = 0.0;
        for (int64_t h = 0; h < hidden; ++h) {
          gate += double{row[h]} * w_gate[i * hidden + h];
          up += double{row[h]} * w_up[i * hidden + h];
        }
        act[i] = gate / (1.0 + std::exp(-gate)) * up;
      }
      for (int64_t h = 0; h < hidden; ++h) {
        double sum = 0.0;
        for (int64_t i = 0; i < inter; ++i) sum += act[i] * w_down[h * inter + i];
        out[t * hidden + h] += weights[t * top_k + j] * sum;
      }
    }
  }
  return out;
}

TEST(MoeExperts, EachRowThroughItsWeightedExperts) {
  std::mt19937 rng(51);
  auto backend = make_cpu_backend(2);
  const int64_t hidden = 24;
  const int64_t inter = 10;
  for (const auto& [rows, experts, top_k] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {13, 5, 2}, {9, 7, 7}, {40, 9, 3}}) {
    OwnedTensor x = random_tensor({rows, hidden}, rng);
    OwnedTensor gate_up = random_tensor({experts, 2 * inter, hidden}, rng, -0.5f, 0.5f);
    OwnedTensor down = random_tensor({experts, hidden, inter}, rng, -0.5f, 0.5f);
    // Distinct experts per row, most rows on expert 0 and the last expert rarely chosen.
    std::vector<int32_t> ids;
    std::vector<float> weights;
    std::uniform_real_distribution<float> weight(0.05f, 1.0f);
    for (int64_t t = 0; t < rows; ++t) {
      std::vector<int32_t> order(experts);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin() + (t % 4 != 0 ? 1 : 0), order.end(), rng);
      for (int64_t j = 0; j < top_k; ++j) {
        ids.push_back(order[j]);
        weights.push_back(weight(rng));
      }
    }
    OwnedTensor id_tensor(DType::kI32, {rows, top_k});
    std::copy(ids.begin(), ids.end(), id_tensor.tensor.data_as<int32_t>());
    OwnedTensor weight_tensor(DType::kF32, {rows, top_k});
    std::copy(weights.begin(), weights.end(), weight_tensor.tensor.data_as<float>());
    OwnedTensor out(DType::kF32, {rows, hidden});
    backend->moe_experts(x.tensor, id_tensor.tensor, weight_tensor.tensor, gate_up.tensor,
                         down.tensor, out.tensor);
    expect_close(out.tensor, reference_experts(x.tensor, ids, weights, gate_up.tensor, down.tensor),
                 1e-4, 1e-5, fmt::format("{} rows, {} experts, top {}", rows, experts, top_k));

    // Over its own input: the same values.
    const std::vector<float> out_of_place = test::to_vector(out.tensor);
    backend->moe_experts(x.tensor, id_tensor.tensor, weight_tensor.tensor, gate_up.tensor,
                         down.tensor, x.tensor);
    EXPECT_EQ(test::to_vector(x.tensor), out_of_place);

    ids[0] = static_cast<int32_t>(experts);  // past the last expert
    std::copy(ids.begin(), ids.end(), id_tensor.tensor.data_as<int32_t>());
    EXPECT_THROW(backend->moe_experts(x.tensor, id_tensor.tensor, weight_tensor.tensor,
                                      gate_up.tensor, down.tensor, out.tensor),
                 Error);
  }
}

}  // namespace
}  // namespace nanovllm
