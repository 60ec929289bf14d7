// The CUDA backend's MLP in one op (rms_norm_mlp) and the pending sum it leaves:
// the MLP against the separate CUDA ops and the CPU's f32 ops on every width it serves; the
// ops that fold the sum in, bit for bit against folding it first; a layer of them replayed in
// a graph, bit for bit against eager calls (the sum's atomics land in any order).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "cuda_test_util.h"
#include "kernels/backend.h"

namespace nanovllm::test {
namespace {

constexpr float kUnitsPerOne = 4294967296.0f;  // the pending sum's fixed point: 2^32

int64_t to_units(float value) {
  return std::llrint(static_cast<double>(value) * kUnitsPerOne);
}
float from_units(int64_t units) {
  return static_cast<float>(units) * (1.0f / kUnitsPerOne);
}

class CudaFusedMlpTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    NVLLM_REQUIRE_CUDA();
    if (dtype() == DType::kF32) GTEST_SKIP() << "served for bf16 and f16 only";
    gpu_ = make_cuda_backend(dtype());
    cpu_ = make_cpu_backend(2);
  }
  DType dtype() const { return GetParam(); }
  std::vector<float> random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    return round_to(dtype(), random_floats(n, rng_, lo, hi));
  }
  // A pending sum [1, width] of random values in (-2, 2), on the device and as units.
  std::vector<int64_t> random_units(int64_t width) {
    const std::vector<float> values = random_floats(width, rng_, -2.0f, 2.0f);
    std::vector<int64_t> units(width);
    for (int64_t i = 0; i < width; ++i) units[i] = to_units(values[i]);
    return units;
  }
  DeviceTensor upload_units(const std::vector<int64_t>& units) {
    DeviceTensor pending(*gpu_, DType::kI64, {1, static_cast<int64_t>(units.size())});
    gpu_->upload(pending.tensor(), units.data());
    return pending;
  }
  std::vector<int64_t> download_units(const Tensor& pending) {
    std::vector<int64_t> units(pending.numel());
    gpu_->download(units.data(), pending);
    return units;
  }
  // round(x + pending) as the device folds it.
  std::vector<float> folded(const std::vector<float>& x, const std::vector<int64_t>& units) {
    std::vector<float> sum(x.size());
    for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + from_units(units[i]);
    return round_to(dtype(), sum);
  }

  std::unique_ptr<Backend> gpu_, cpu_;
  std::mt19937 rng_{17};
};

TEST_P(CudaFusedMlpTest, ServesOneRowOfSmallModels) {
  EXPECT_TRUE(gpu_->one_row_kernels(1024, 3072, 4096).mlp);    // Qwen3-0.6B
  EXPECT_FALSE(gpu_->one_row_kernels(2048, 6144, 4096).mlp);   // Qwen3-1.7B: a row too wide
  EXPECT_FALSE(gpu_->one_row_kernels(4096, 12288, 6144).mlp);  // Qwen3-8B
  EXPECT_FALSE(gpu_->one_row_kernels(1280, 3072, 4096).mlp);   // not a warp's vectors
  EXPECT_FALSE(gpu_->one_row_kernels(1024, 3076, 4096).mlp);   // not 16-byte vectors
  EXPECT_FALSE(cpu_->one_row_kernels(1024, 3072, 4096).mlp);
  EXPECT_FALSE(make_cuda_backend(DType::kF32)->one_row_kernels(1024, 3072, 4096).mlp);
  // Unserved widths are an error, not a wrong answer.
  DeviceTensor x = upload_floats(*gpu_, dtype(), {1, 1280}, random(1280));
  DeviceTensor norm = upload_floats(*gpu_, dtype(), {1280}, random(1280));
  DeviceTensor up = upload_floats(*gpu_, dtype(), {16, 1280}, random(16 * 1280));
  DeviceTensor down = upload_floats(*gpu_, dtype(), {1280, 8}, random(1280 * 8));
  DeviceTensor pending = upload_units(std::vector<int64_t>(1280, 0));
  EXPECT_THROW(gpu_->rms_norm_mlp(x.tensor(), norm.tensor(), 1e-6f, up.tensor(), down.tensor(),
                                  pending.tensor()),
               Error);
}

TEST_P(CudaFusedMlpTest, AddsTheMlpToThePendingSum) {
  const std::pair<int64_t, int64_t> shapes[] = {
      {256, 8}, {256, 200}, {512, 1032}, {1024, 3072}, {1024, 3992}};
  for (const auto& [hidden, inter] : shapes) {
    const std::string what = "rms_norm_mlp " + std::to_string(hidden) + "x" + std::to_string(inter);
    ASSERT_TRUE(gpu_->one_row_kernels(hidden, inter, 2 * inter).mlp) << what;
    const std::vector<float> x = random(hidden, -3.0f, 3.0f);
    const std::vector<float> norm = random(hidden, 0.5f, 1.5f);
    // Small weights keep f16's separate ops finite.
    const std::vector<float> up = random(2 * inter * hidden, -0.1f, 0.1f);
    const std::vector<float> down = random(hidden * inter, -0.1f, 0.1f);
    DeviceTensor g_x = upload_floats(*gpu_, dtype(), {1, hidden}, x);
    DeviceTensor g_norm = upload_floats(*gpu_, dtype(), {hidden}, norm);
    DeviceTensor g_up = upload_floats(*gpu_, dtype(), {2 * inter, hidden}, up);
    DeviceTensor g_down = upload_floats(*gpu_, dtype(), {hidden, inter}, down);
    const std::vector<int64_t> before = random_units(hidden);
    DeviceTensor pending = upload_units(before);
    gpu_->rms_norm_mlp(g_x.tensor(), g_norm.tensor(), 1e-6f, g_up.tensor(), g_down.tensor(),
                       pending.tensor());
    const std::vector<int64_t> after = download_units(pending.tensor());
    std::vector<float> fused(hidden);
    for (int64_t i = 0; i < hidden; ++i) fused[i] = from_units(after[i] - before[i]);

    // The separate GPU ops: the same values up to the order of the norm's sum of squares and
    // the rounding of the output, which the fused op leaves unrounded.
    DeviceTensor g_gate_up(*gpu_, dtype(), {1, 2 * inter});
    DeviceTensor g_out = upload_floats(*gpu_, dtype(), {1, hidden}, std::vector<float>(hidden));
    gpu_->rms_norm_linear(g_x.tensor(), g_norm.tensor(), 1e-6f, g_up.tensor(), g_gate_up.tensor());
    gpu_->silu_linear_add(g_gate_up.tensor(), g_down.tensor(), g_out.tensor());
    expect_relative_error(fused, download_floats(*gpu_, g_out.tensor()),
                          dtype() == DType::kBF16 ? 5e-3 : 1e-3,
                          what + " against the separate ops");
    // The CPU's f32 ops.
    OwnedTensor c_x = host_floats({1, hidden}, x);
    OwnedTensor c_norm = host_floats({hidden}, norm);
    OwnedTensor c_up = host_floats({2 * inter, hidden}, up);
    OwnedTensor c_down = host_floats({hidden, inter}, down);
    OwnedTensor c_h(DType::kF32, {1, hidden});
    OwnedTensor c_gate_up(DType::kF32, {1, 2 * inter});
    OwnedTensor c_act(DType::kF32, {1, inter});
    OwnedTensor c_out(DType::kF32, {1, hidden});
    cpu_->rms_norm(c_x.tensor, c_norm.tensor, 1e-6f, c_h.tensor);
    cpu_->linear(c_h.tensor, c_up.tensor, c_gate_up.tensor);
    cpu_->silu_mul(c_gate_up.tensor, c_act.tensor);
    cpu_->linear(c_act.tensor, c_down.tensor, c_out.tensor);
    expect_relative_error(fused, values_of(c_out.tensor), relative_tolerance(dtype()),
                          what + " against the CPU");
  }
}

TEST_P(CudaFusedMlpTest, LinearsFoldThePendingSumIn) {
  const int64_t n = 1001, k = 1024;
  const std::vector<float> x = random(k, -3.0f, 3.0f);
  const std::vector<float> norm = random(k, 0.5f, 1.5f);
  const std::vector<float> w = random(n * k);
  DeviceTensor g_norm = upload_floats(*gpu_, dtype(), {k}, norm);
  DeviceTensor g_w = upload_floats(*gpu_, dtype(), {n, k}, w);

  // rms_norm_linear reads x + pending and leaves the sum alone.
  const std::vector<int64_t> x_units = random_units(k);
  DeviceTensor pending = upload_units(x_units);
  DeviceTensor g_x = upload_floats(*gpu_, dtype(), {1, k}, x);
  DeviceTensor g_folded_x = upload_floats(*gpu_, dtype(), {1, k}, folded(x, x_units));
  DeviceTensor out(*gpu_, dtype(), {1, n});
  DeviceTensor expected(*gpu_, dtype(), {1, n});
  gpu_->rms_norm_linear(g_x.tensor(), g_norm.tensor(), 1e-6f, g_w.tensor(), out.tensor(),
                        pending.tensor());
  gpu_->rms_norm_linear(g_folded_x.tensor(), g_norm.tensor(), 1e-6f, g_w.tensor(),
                        expected.tensor());
  EXPECT_EQ(download_floats(*gpu_, out.tensor()), download_floats(*gpu_, expected.tensor()));
  EXPECT_EQ(download_units(pending.tensor()), x_units);

  // linear_add folds the sum into the residual before its add, and clears it.
  const std::vector<float> residual = random(n, -4.0f, 4.0f);
  const std::vector<int64_t> residual_units = random_units(n);
  DeviceTensor out_pending = upload_units(residual_units);
  DeviceTensor g_residual = upload_floats(*gpu_, dtype(), {1, n}, residual);
  DeviceTensor g_folded_residual =
      upload_floats(*gpu_, dtype(), {1, n}, folded(residual, residual_units));
  DeviceTensor g_in = upload_floats(*gpu_, dtype(), {1, k}, x);
  gpu_->linear_add(g_in.tensor(), g_w.tensor(), g_residual.tensor(), out_pending.tensor());
  gpu_->linear_add(g_in.tensor(), g_w.tensor(), g_folded_residual.tensor());
  EXPECT_EQ(download_floats(*gpu_, g_residual.tensor()),
            download_floats(*gpu_, g_folded_residual.tensor()));
  EXPECT_EQ(download_units(out_pending.tensor()), std::vector<int64_t>(n, 0));

  // fold_pending writes the sum back and clears it.
  const std::vector<int64_t> fold_units = random_units(k);
  DeviceTensor fold_pending = upload_units(fold_units);
  DeviceTensor g_stream = upload_floats(*gpu_, dtype(), {1, k}, x);
  gpu_->fold_pending(g_stream.tensor(), fold_pending.tensor());
  EXPECT_EQ(download_floats(*gpu_, g_stream.tensor()), folded(x, fold_units));
  EXPECT_EQ(download_units(fold_pending.tensor()), std::vector<int64_t>(k, 0));

  // A pending sum goes with one row only.
  DeviceTensor two_rows = upload_floats(*gpu_, dtype(), {2, k}, random(2 * k));
  DeviceTensor two_out(*gpu_, dtype(), {2, n});
  EXPECT_THROW(gpu_->rms_norm_linear(two_rows.tensor(), g_norm.tensor(), 1e-6f, g_w.tensor(),
                                     two_out.tensor(), pending.tensor()),
               Error);
}

// rms_norm_linear with a bias (Qwen2's q/k/v), at one row (x staged for it alone) and more:
// the CPU's rms_norm, linear and add_bias in f32.
TEST_P(CudaFusedMlpTest, RmsNormLinearAddsTheBias) {
  const int64_t n = 1001, k = 1024;
  const std::vector<float> norm = random(k, 0.5f, 1.5f);
  const std::vector<float> w = random(n * k);
  const std::vector<float> bias = random(n, -4.0f, 4.0f);
  DeviceTensor g_norm = upload_floats(*gpu_, dtype(), {k}, norm);
  DeviceTensor g_w = upload_floats(*gpu_, dtype(), {n, k}, w);
  DeviceTensor g_bias = upload_floats(*gpu_, dtype(), {n}, bias);
  for (int64_t m : {1, 5}) {
    const std::vector<float> x = random(m * k, -3.0f, 3.0f);
    OwnedTensor c_x = host_floats({m, k}, x);
    OwnedTensor c_norm = host_floats({k}, norm);
    OwnedTensor c_w = host_floats({n, k}, w);
    OwnedTensor c_bias = host_floats({n}, bias);
    OwnedTensor c_h(DType::kF32, {m, k});
    OwnedTensor c_out(DType::kF32, {m, n});
    cpu_->rms_norm(c_x.tensor, c_norm.tensor, 1e-6f, c_h.tensor);
    cpu_->linear(c_h.tensor, c_w.tensor, c_out.tensor);
    cpu_->add_bias(c_out.tensor, c_bias.tensor);
    DeviceTensor g_x = upload_floats(*gpu_, dtype(), {m, k}, x);
    DeviceTensor out(*gpu_, dtype(), {m, n});
    gpu_->rms_norm_linear(g_x.tensor(), g_norm.tensor(), 1e-6f, g_w.tensor(), out.tensor(), {},
                          g_bias.tensor());
    expect_relative_error(download_floats(*gpu_, out.tensor()), values_of(c_out.tensor),
                          relative_tolerance(dtype()), fmt::format("{} rows", m));
  }
  // A bias goes into an out of the compute dtype.
  DeviceTensor g_x = upload_floats(*gpu_, dtype(), {1, k}, random(k));
  DeviceTensor logits(*gpu_, DType::kF32, {1, n});
  EXPECT_THROW(gpu_->rms_norm_linear(g_x.tensor(), g_norm.tensor(), 1e-6f, g_w.tensor(),
                                     logits.tensor(), {}, g_bias.tensor()),
               Error);
}

// Two layers' linears in the order the model runs them with the MLP fused, then the fold:
// eager calls twice and graph replays give the same bits.
TEST_P(CudaFusedMlpTest, LayersReplayInGraphBitForBit) {
  const int64_t hidden = 1024, inter = 3072, q = 2048;
  DeviceTensor residual = upload_floats(*gpu_, dtype(), {1, hidden}, random(hidden));
  DeviceTensor norm = upload_floats(*gpu_, dtype(), {hidden}, random(hidden, 0.5f, 1.5f));
  DeviceTensor qkv_w =
      upload_floats(*gpu_, dtype(), {q, hidden}, random(q * hidden, -0.05f, 0.05f));
  DeviceTensor o_w = upload_floats(*gpu_, dtype(), {hidden, q}, random(hidden * q, -0.05f, 0.05f));
  DeviceTensor up_w =
      upload_floats(*gpu_, dtype(), {2 * inter, hidden}, random(2 * inter * hidden, -0.05f, 0.05f));
  DeviceTensor down_w =
      upload_floats(*gpu_, dtype(), {hidden, inter}, random(hidden * inter, -0.05f, 0.05f));
  DeviceTensor attn(*gpu_, dtype(), {1, q});
  DeviceTensor pending = upload_units(std::vector<int64_t>(hidden, 0));
  auto layers = [&] {
    for (int layer = 0; layer < 2; ++layer) {
      // The attention output stands in as the q projection itself.
      gpu_->rms_norm_linear(residual.tensor(), norm.tensor(), 1e-6f, qkv_w.tensor(), attn.tensor(),
                            pending.tensor());
      gpu_->linear_add(attn.tensor(), o_w.tensor(), residual.tensor(), pending.tensor());
      gpu_->rms_norm_mlp(residual.tensor(), norm.tensor(), 1e-6f, up_w.tensor(), down_w.tensor(),
                         pending.tensor());
    }
    gpu_->fold_pending(residual.tensor(), pending.tensor());
  };
  const std::vector<float> start = download_floats(*gpu_, residual.tensor());
  layers();
  const std::vector<float> eager = download_floats(*gpu_, residual.tensor());
  for (float v : eager) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(eager, start);
  upload_into(*gpu_, residual.tensor(), start);
  layers();
  EXPECT_EQ(download_floats(*gpu_, residual.tensor()), eager);
  std::unique_ptr<CapturedGraph> graph = gpu_->capture(layers);
  ASSERT_NE(graph, nullptr);
  for (int replay = 0; replay < 2; ++replay) {
    upload_into(*gpu_, residual.tensor(), start);
    graph->replay();
    EXPECT_EQ(download_floats(*gpu_, residual.tensor()), eager);
    EXPECT_EQ(download_units(pending.tensor()), std::vector<int64_t>(hidden, 0));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaFusedMlpTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_label(info.param)); });

}  // namespace
}  // namespace nanovllm::test
