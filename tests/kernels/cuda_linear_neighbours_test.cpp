// The CUDA backend's linears that carry their neighbours (rms_norm_linear, linear_add,
// silu_linear_add) against the separate CUDA ops they replace, and against the CPU backend's
// f32 ops, on odd shapes, strided operands and every decode batch size.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "cuda_test_util.h"
#include "kernels/backend.h"
#include "kernels/cuda/linear/gemv_persistent.h"

namespace nanovllm::test {
namespace {

// Width of a row that sits `pad` elements into a wider buffer, so operands are strided slices.
constexpr int64_t kPad = 8;

class CudaLinearNeighboursTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    NVLLM_REQUIRE_CUDA();
    gpu_ = make_cuda_backend(dtype());
    cpu_ = make_cpu_backend(2);
  }
  DType dtype() const { return GetParam(); }
  std::vector<float> random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    return round_to(dtype(), random_floats(n, rng_, lo, hi));
  }
  // [rows, width] of `values` placed at column kPad of a [rows, width + 2 kPad] device buffer,
  // whose other columns hold `fill`.
  struct Slice {
    DeviceTensor buffer;
    Tensor view;
  };
  Slice upload_slice(int64_t rows, int64_t width, const std::vector<float>& values, float fill) {
    const int64_t wide = width + 2 * kPad;
    std::vector<float> all(rows * wide, fill);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < width; ++i) all[r * wide + kPad + i] = values[r * width + i];
    }
    Slice slice{upload_floats(*gpu_, dtype(), {rows, wide}, all), Tensor()};
    slice.view = slice.buffer.tensor().slice_last(kPad, kPad + width);
    return slice;
  }
  // The slice's values, expecting `fill` (NaN: any NaN) in the columns around it.
  std::vector<float> download_slice(Slice& slice, int64_t rows, int64_t width, float fill,
                                    const std::string& what) {
    const int64_t wide = width + 2 * kPad;
    const std::vector<float> all = download_floats(*gpu_, slice.buffer.tensor());
    std::vector<float> values(rows * width);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < wide; ++i) {
        const float v = all[r * wide + i];
        if (i >= kPad && i < kPad + width) {
          values[r * width + i - kPad] = v;
        } else {
          EXPECT_TRUE(std::isnan(fill) ? std::isnan(v) : v == fill)
              << what << " wrote outside its slice at row " << r << " column " << i;
        }
      }
    }
    return values;
  }

  // A random residual plus x @ weight^T by the separate ops (linear, then add_rms_norm, whose
  // norm output is not compared) against `fused(residual)` on a strided copy of it: bit for
  // bit, as the same kernel rounds the same way.
  template <typename Fused>
  void expect_adds_like_separate_ops(const Tensor& x, const Tensor& weight, Fused fused,
                                     const std::string& what) {
    const int64_t m = x.size(0), n = weight.size(0);
    const std::vector<float> residual = random(m * n, -4.0f, 4.0f);
    DeviceTensor h(*gpu_, dtype(), {m, n});
    DeviceTensor separate = upload_floats(*gpu_, dtype(), {m, n}, residual);
    DeviceTensor ones = upload_floats(*gpu_, dtype(), {n}, std::vector<float>(n, 1.0f));
    gpu_->linear(x, weight, h.tensor());
    gpu_->add_rms_norm(h.tensor(), separate.tensor(), ones.tensor(), 1e-6f);
    Slice sliced = upload_slice(m, n, residual, 5.0f);
    fused(sliced.view);
    EXPECT_EQ(download_slice(sliced, m, n, 5.0f, what), download_floats(*gpu_, separate.tensor()))
        << what;
  }

  std::unique_ptr<Backend> gpu_, cpu_;
  std::mt19937 rng_{11};
};

std::string shape_label(int64_t m, int64_t n, int64_t k) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

// The one-row kernels serve half dtypes at widths a CTA holds, and at wider ones where every
// normed linear takes the persistent kernel (models take them at one row, where they pay); the
// ops themselves serve up to 8 rows.
TEST_P(CudaLinearNeighboursTest, ServesHalfDtypesAtOneRow) {
  const bool half = dtype() != DType::kF32;
  EXPECT_EQ(gpu_->one_row_kernels(1024, 3072, 4096).linears, half);
  EXPECT_EQ(gpu_->one_row_kernels(4096, 12288, 6144).linears, half);
  EXPECT_EQ(gpu_->one_row_kernels(5120, 17408, 7168).linears, half);  // Qwen3-14B
  // A row wider than a CTA holds, into a weight too small for the persistent kernel.
  EXPECT_FALSE(gpu_->one_row_kernels(5120, 17408, 16).linears);
  EXPECT_FALSE(gpu_->one_row_kernels(1024, 3070, 4096).linears);  // not 16-byte vectors
  EXPECT_FALSE(cpu_->one_row_kernels(1024, 3072, 4096).linears);
  DeviceTensor x = upload_floats(*gpu_, dtype(), {1, 5120}, random(5120));
  DeviceTensor norm = upload_floats(*gpu_, dtype(), {5120}, random(5120));
  DeviceTensor w = upload_floats(*gpu_, dtype(), {16, 5120}, random(16 * 5120));
  DeviceTensor out(*gpu_, dtype(), {1, 16});
  EXPECT_THROW(gpu_->rms_norm_linear(x.tensor(), norm.tensor(), 1e-6f, w.tensor(), out.tensor()),
               Error);
}

TEST_P(CudaLinearNeighboursTest, RmsNormLinearEqualsNormThenLinear) {
  if (dtype() == DType::kF32) GTEST_SKIP() << "served for bf16 and f16 only";
  int64_t m = 0;
  for (int64_t n : {1, 7, 1001}) {
    for (int64_t k : {8, 72, 1000, 1024, 4096}) {
      m = m % 8 + 1;
      const std::vector<float> x = random(m * k, -3.0f, 3.0f);
      const std::vector<float> norm = random(k, 0.5f, 1.5f);
      const std::vector<float> w = random(n * k);
      const std::string what = "rms_norm_linear " + shape_label(m, n, k);
      Slice g_x = upload_slice(m, k, x, 0.0f);
      DeviceTensor g_norm = upload_floats(*gpu_, dtype(), {k}, norm);
      DeviceTensor g_w = upload_floats(*gpu_, dtype(), {n, k}, w);

      // The separate ops on the GPU: the same values up to the order of the sum of squares.
      DeviceTensor g_h(*gpu_, dtype(), {m, k});
      DeviceTensor g_separate(*gpu_, DType::kF32, {m, n});
      gpu_->rms_norm(g_x.view, g_norm.tensor(), 1e-6f, g_h.tensor());
      gpu_->linear(g_h.tensor(), g_w.tensor(), g_separate.tensor());
      // The CPU's f32 ops.
      OwnedTensor c_x = host_floats({m, k}, x);
      OwnedTensor c_norm = host_floats({k}, norm);
      OwnedTensor c_w = host_floats({n, k}, w);
      OwnedTensor c_h(DType::kF32, {m, k});
      OwnedTensor c_out(DType::kF32, {m, n});
      cpu_->rms_norm(c_x.tensor, c_norm.tensor, 1e-6f, c_h.tensor);
      cpu_->linear(c_h.tensor, c_w.tensor, c_out.tensor);

      for (DType out_dtype : {dtype(), DType::kF32}) {
        const float nan = std::nanf("");
        const int64_t wide = n + 2 * kPad;
        Slice g_out{DeviceTensor(*gpu_, out_dtype, {m, wide}), Tensor()};
        poison(*gpu_, g_out.buffer.tensor());
        g_out.view = g_out.buffer.tensor().slice_last(kPad, kPad + n);
        gpu_->rms_norm_linear(g_x.view, g_norm.tensor(), 1e-6f, g_w.tensor(), g_out.view);
        const std::string label = what + " out " + std::string(dtype_name(out_dtype));
        const std::vector<float> fused = download_slice(g_out, m, n, nan, label);
        std::vector<float> separate = download_floats(*gpu_, g_separate.tensor());
        if (out_dtype != DType::kF32) separate = round_to(out_dtype, separate);
        expect_relative_error(fused, separate, 1e-3, label + " against the separate ops");
        expect_relative_error(fused, values_of(c_out.tensor), relative_tolerance(dtype()),
                              label + " against the CPU");
      }
    }
  }
}

TEST_P(CudaLinearNeighboursTest, LinearAddEqualsLinearThenResidualAdd) {
  if (dtype() == DType::kF32) GTEST_SKIP() << "served for bf16 and f16 only";
  int64_t m = 3;
  for (int64_t n : {1, 7, 1001}) {
    for (int64_t k : {8, 72, 2048, 3000}) {
      m = m % 8 + 1;
      Slice g_x = upload_slice(m, k, random(m * k), 0.0f);
      DeviceTensor g_w = upload_floats(*gpu_, dtype(), {n, k}, random(n * k));
      expect_adds_like_separate_ops(
          g_x.view, g_w.tensor(),
          [&](Tensor residual) { gpu_->linear_add(g_x.view, g_w.tensor(), residual); },
          "linear_add " + shape_label(m, n, k));
    }
  }
}

TEST_P(CudaLinearNeighboursTest, SiluLinearAddEqualsSiluThenLinearThenResidualAdd) {
  if (dtype() == DType::kF32) GTEST_SKIP() << "served for bf16 and f16 only";
  int64_t m = 5;
  for (int64_t n : {1, 7, 1001}) {
    for (int64_t inter : {8, 72, 1000, 3072}) {
      m = m % 8 + 1;
      Slice g_gate_up = upload_slice(m, 2 * inter, random(m * 2 * inter, -4.0f, 4.0f), 0.0f);
      DeviceTensor g_w = upload_floats(*gpu_, dtype(), {n, inter}, random(n * inter));
      DeviceTensor g_act(*gpu_, dtype(), {m, inter});
      gpu_->silu_mul(g_gate_up.view, g_act.tensor());
      expect_adds_like_separate_ops(
          g_act.tensor(), g_w.tensor(),
          [&](Tensor residual) { gpu_->silu_linear_add(g_gate_up.view, g_w.tensor(), residual); },
          "silu_linear_add " + shape_label(m, n, inter));
    }
  }
}

// The three in the order a layer runs them, captured in a graph: replays give what eager
// calls give (k = 4096 takes the GEMV's largest shared-memory configuration).
TEST_P(CudaLinearNeighboursTest, LayerOfFusedLinearsReplaysInGraph) {
  if (dtype() == DType::kF32) GTEST_SKIP() << "served for bf16 and f16 only";
  const int64_t m = 2, hidden = 4096, inter = 1024;
  DeviceTensor residual = upload_floats(*gpu_, dtype(), {m, hidden}, random(m * hidden));
  DeviceTensor norm = upload_floats(*gpu_, dtype(), {hidden}, random(hidden, 0.5f, 1.5f));
  // Small weights, so that two layers stay finite in f16.
  DeviceTensor up_w =
      upload_floats(*gpu_, dtype(), {2 * inter, hidden}, random(2 * inter * hidden, -0.05f, 0.05f));
  DeviceTensor down_w =
      upload_floats(*gpu_, dtype(), {hidden, inter}, random(hidden * inter, -0.05f, 0.05f));
  DeviceTensor gate_up(*gpu_, dtype(), {m, 2 * inter});
  auto layer = [&] {
    gpu_->rms_norm_linear(residual.tensor(), norm.tensor(), 1e-6f, up_w.tensor(), gate_up.tensor());
    gpu_->silu_linear_add(gate_up.tensor(), down_w.tensor(), residual.tensor());
  };
  const std::vector<float> start = download_floats(*gpu_, residual.tensor());
  layer();
  layer();
  const std::vector<float> eager = download_floats(*gpu_, residual.tensor());
  upload_into(*gpu_, residual.tensor(), start);
  std::unique_ptr<CapturedGraph> graph = gpu_->capture(layer);
  ASSERT_NE(graph, nullptr);
  upload_into(*gpu_, residual.tensor(), start);
  graph->replay();
  graph->replay();
  for (float v : eager) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(download_floats(*gpu_, residual.tensor()), eager);
}

// At one row a weight of many tiles takes the persistent GEMV (gemv_persistent.cu). Where one
// step of its warps covers k (up to 4,096) it sums as the kernel of a CTA a tile does, so its row
// equals bit for bit the first row of the same op at two rows (the kernel of a CTA a tile with a
// norm or SiLU, which the persistent one serves at one row only; itself otherwise); every case
// also against the CPU's f32 ops. The shapes: odd tile counts, fewer and many more tiles than
// CTAs, k with a warp's last step partly past its end, k over several steps, and norms wider
// than the kernel of a CTA a tile takes.
TEST_P(CudaLinearNeighboursTest, OneRowOfALargeWeightMatchesTwoRowsAndTheCpu) {
  if (dtype() == DType::kF32) GTEST_SKIP() << "served for bf16 and f16 only";
  enum class Op {
    kLinear,
    kLinearBias,
    kRmsNormLinear,
    kRmsNormLinearBias,
    kLinearAdd,
    kSiluLinearAdd
  };
  struct Case {
    Op op;
    int64_t n, k;
    bool f32_out;
  };
  const Case cases[] = {
      {Op::kLinear, 2053, 4096, false},
      {Op::kLinear, 1031, 8200, false},
      {Op::kLinear, 16393, 2048, true},
      {Op::kLinearBias, 4099, 2056, false},
      {Op::kRmsNormLinear, 2053, 4096, false},
      {Op::kRmsNormLinear, 4099, 2056, true},
      {Op::kRmsNormLinearBias, 16393, 2048, false},
      {Op::kRmsNormLinear, 2053, 5120, false},  // norms wider than the other kernel takes
      {Op::kRmsNormLinearBias, 1031, 8200, false},
      {Op::kLinearAdd, 4103, 2048, false},
      {Op::kLinearAdd, 1031, 8200, false},
      {Op::kSiluLinearAdd, 4103, 2048, false},
      {Op::kSiluLinearAdd, 1029, 8200, false},
  };
  for (const Case& c : cases) {
    const int64_t n = c.n, k = c.k;
    const bool silu = c.op == Op::kSiluLinearAdd;
    const bool norm = c.op == Op::kRmsNormLinear || c.op == Op::kRmsNormLinearBias;
    const bool bias = c.op == Op::kLinearBias || c.op == Op::kRmsNormLinearBias;
    const bool adds = c.op == Op::kLinearAdd || silu;
    const int64_t width = silu ? 2 * k : k;
    const DType out_dtype = c.f32_out ? DType::kF32 : dtype();
    const std::string what = "one row " + std::to_string(static_cast<int>(c.op)) + " " +
                             shape_label(1, n, k) + (c.f32_out ? " f32 out" : "");
    const std::vector<float> x = random(2 * width, -3.0f, 3.0f);
    const std::vector<float> w = random(n * k);
    const std::vector<float> norm_w = random(k, 0.5f, 1.5f);
    const std::vector<float> b = random(n);
    const std::vector<float> residual = random(2 * n, -4.0f, 4.0f);
    DeviceTensor g_x = upload_floats(*gpu_, dtype(), {2, width}, x);
    DeviceTensor g_w = upload_floats(*gpu_, dtype(), {n, k}, w);
    DeviceTensor g_norm = upload_floats(*gpu_, dtype(), {k}, norm_w);
    DeviceTensor g_bias = upload_floats(*gpu_, dtype(), {n}, b);
    // Runs the op on the first `rows` rows; returns its first row.
    const auto run = [&](int64_t rows) {
      const Tensor in = g_x.tensor().slice_rows(0, rows);
      DeviceTensor out = adds ? upload_floats(*gpu_, dtype(), {2, n}, residual)
                              : DeviceTensor(*gpu_, out_dtype, {2, n});
      const Tensor o = out.tensor().slice_rows(0, rows);
      if (rows == 1) {  // the operands gemv() is given
        cuda::GemvArgs args;
        args.in_dtype = dtype();
        args.out_dtype = out_dtype;
        args.x = in.data();
        args.ldx = width;
        args.weight = g_w.tensor().data();
        args.ldw = k;
        args.out = o.data();
        args.ldo = n;
        args.m = 1, args.n = n, args.k = k;
        args.norm_weight = norm ? g_norm.tensor().data() : nullptr;
        args.silu_gate = silu;
        args.residual = adds ? o.data() : nullptr;
        args.ldr = n;
        args.bias = bias ? g_bias.tensor().data() : nullptr;
        EXPECT_TRUE(cuda::gemv_persistent_serves(args)) << what;
      }
      switch (c.op) {
        case Op::kLinear:
          gpu_->linear(in, g_w.tensor(), o);
          break;
        case Op::kLinearBias:
          gpu_->linear_bias(in, g_w.tensor(), g_bias.tensor(), o);
          break;
        case Op::kRmsNormLinear:
          gpu_->rms_norm_linear(in, g_norm.tensor(), 1e-6f, g_w.tensor(), o);
          break;
        case Op::kRmsNormLinearBias:
          gpu_->rms_norm_linear(in, g_norm.tensor(), 1e-6f, g_w.tensor(), o, {}, g_bias.tensor());
          break;
        case Op::kLinearAdd:
          gpu_->linear_add(in, g_w.tensor(), o);
          break;
        case Op::kSiluLinearAdd:
          gpu_->silu_linear_add(in, g_w.tensor(), o);
          break;
      }
      std::vector<float> first = download_floats(*gpu_, out.tensor());
      first.resize(n);
      return first;
    };
    const std::vector<float> one = run(1);
    if (k <= 4096) {
      EXPECT_EQ(one, run(2)) << what << " against its first row of two";
    }

    // The CPU's f32 ops on the first row; for the adds, the product the residual gained.
    OwnedTensor c_x = host_floats({1, width}, std::vector<float>(x.begin(), x.begin() + width));
    OwnedTensor c_in(DType::kF32, {1, k});
    if (silu) cpu_->silu_mul(c_x.tensor, c_in.tensor);
    if (norm) cpu_->rms_norm(c_x.tensor, host_floats({k}, norm_w).tensor, 1e-6f, c_in.tensor);
    OwnedTensor c_out(DType::kF32, {1, n});
    cpu_->linear(silu || norm ? c_in.tensor : c_x.tensor, host_floats({n, k}, w).tensor,
                 c_out.tensor);
    std::vector<float> expected = values_of(c_out.tensor), actual = one;
    for (int64_t i = 0; i < n; ++i) {
      if (bias) expected[i] += b[i];
      if (adds) actual[i] -= residual[i];
    }
    expect_relative_error(actual, expected, relative_tolerance(dtype()), what + " against the CPU");
  }
}

// Up to 8 rows without a norm or SiLU take the persistent GEMV as well, while their staged x
// fits beside the weight's ring (Hopper's 227 KB a CTA): where the ring is that of one row,
// each row equals bit for bit that row alone (the MMA keeps x's rows apart and the warps' sums
// meet in the same order); where x takes room from the ring, fewer warps split k in more
// steps; every row equals the CPU's f32 op. x and out are strided slices. The last two cases
// the linear leaves to cuBLASLt: a smaller ring whose tiles leave most SMs idle in their last
// round, and more of x than fits beside the smallest ring.
TEST_P(CudaLinearNeighboursTest, RowsOfALargeWeightMatchTheCpuAndThatRowAlone) {
  if (dtype() == DType::kF32) GTEST_SKIP() << "served for bf16 and f16 only";
  enum class Op { kLinear, kLinearBias, kLinearAdd };
  // How the persistent kernel takes the rows: with the split of k of one row (each row's sums
  // then the same bits as that row alone), with fewer warps and more steps (x's rows and the
  // full ring do not fit), or not at all (the linear then takes cuBLASLt).
  enum class Path { kAsOneRow, kSmallerRing, kNotPersistent };
  struct Case {
    Op op;
    int64_t m, n, k;
    bool f32_out;
    Path path;
  };
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  // n for 8-row tiles that make one round of a CTA an SM, and two rounds, the second a quarter
  // full.
  const int64_t one_round_of_tiles = 8 * sms - 5, two_rounds_of_tiles = 8 * (sms + sms / 4) + 3;
  const Case cases[] = {
      {Op::kLinear, 2, 2053, 4096, false, Path::kAsOneRow},
      {Op::kLinear, 8, 2053, 4096, false, Path::kAsOneRow},
      {Op::kLinear, 3, 16393, 2048, true, Path::kAsOneRow},
      {Op::kLinearBias, 5, 4099, 2056, false, Path::kAsOneRow},
      {Op::kLinearAdd, 8, 4103, 2048, false, Path::kAsOneRow},
      {Op::kLinear, 4, 1031, 8200, false, Path::kAsOneRow},
      {Op::kLinearAdd, 2, 1031, 8200, false, Path::kAsOneRow},
      {Op::kLinear, 8, 1031, 8200, true, Path::kAsOneRow},
      {Op::kLinearAdd, 4, one_round_of_tiles, 12288, false, Path::kSmallerRing},
      {Op::kLinear, 8, one_round_of_tiles, 9728, true, Path::kSmallerRing},
      {Op::kLinearBias, 3, one_round_of_tiles, 18952, false, Path::kSmallerRing},
      {Op::kLinear, 4, two_rounds_of_tiles, 12288, false, Path::kNotPersistent},
      {Op::kLinear, 7, 601, 16000, false, Path::kNotPersistent},
  };
  const float nan = std::nanf("");
  for (const Case& c : cases) {
    const int64_t m = c.m, n = c.n, k = c.k;
    const bool bias = c.op == Op::kLinearBias;
    const bool adds = c.op == Op::kLinearAdd;
    const DType out_dtype = c.f32_out ? DType::kF32 : dtype();
    const std::string what = "rows " + std::to_string(static_cast<int>(c.op)) + " " +
                             shape_label(m, n, k) + (c.f32_out ? " f32 out" : "");
    const std::vector<float> x = random(m * k, -3.0f, 3.0f);
    const std::vector<float> w = random(n * k);
    const std::vector<float> b = random(n);
    const std::vector<float> residual = random(m * n, -4.0f, 4.0f);
    Slice g_x = upload_slice(m, k, x, 0.0f);
    DeviceTensor g_w = upload_floats(*gpu_, dtype(), {n, k}, w);
    DeviceTensor g_bias = upload_floats(*gpu_, dtype(), {n}, b);
    const auto rows_of = [](const std::vector<float>& values, int64_t first, int64_t rows,
                            int64_t width) {
      return std::vector<float>(values.begin() + first * width,
                                values.begin() + (first + rows) * width);
    };
    // Runs the op on x's rows [first, first + rows); returns its output rows.
    const auto run = [&](int64_t first, int64_t rows) {
      const Tensor in = g_x.view.slice_rows(first, first + rows);
      Slice out = adds ? upload_slice(rows, n, rows_of(residual, first, rows, n), 5.0f)
                       : Slice{DeviceTensor(*gpu_, out_dtype, {rows, n + 2 * kPad}), Tensor()};
      if (!adds) {
        poison(*gpu_, out.buffer.tensor());
        out.view = out.buffer.tensor().slice_last(kPad, kPad + n);
      }
      cuda::GemvArgs args;
      args.in_dtype = dtype();
      args.out_dtype = out_dtype;
      args.x = in.data();
      args.ldx = in.stride(0);
      args.weight = g_w.tensor().data();
      args.ldw = k;
      args.out = out.view.data();
      args.ldo = out.view.stride(0);
      args.m = rows, args.n = n, args.k = k;
      args.residual = adds ? out.view.data() : nullptr;
      args.ldr = out.view.stride(0);
      args.bias = bias ? g_bias.tensor().data() : nullptr;
      EXPECT_EQ(cuda::gemv_persistent_serves(args), c.path != Path::kNotPersistent || rows == 1)
          << what << " at " << rows << " rows";
      switch (c.op) {
        case Op::kLinear:
          gpu_->linear(in, g_w.tensor(), out.view);
          break;
        case Op::kLinearBias:
          gpu_->linear_bias(in, g_w.tensor(), g_bias.tensor(), out.view);
          break;
        case Op::kLinearAdd:
          gpu_->linear_add(in, g_w.tensor(), out.view);
          break;
      }
      return download_slice(out, rows, n, adds ? 5.0f : nan, what);
    };
    const std::vector<float> all = run(0, m);
    if (c.path == Path::kAsOneRow) {
      for (int64_t r = 0; r < m; ++r) {
        EXPECT_EQ(rows_of(all, r, 1, n), run(r, 1)) << what << ": row " << r << " alone";
      }
    }

    OwnedTensor c_out(DType::kF32, {m, n});
    cpu_->linear(host_floats({m, k}, x).tensor, host_floats({n, k}, w).tensor, c_out.tensor);
    std::vector<float> expected = values_of(c_out.tensor), actual = all;
    for (int64_t i = 0; i < m * n; ++i) {
      if (bias) expected[i] += b[i % n];
      if (adds) actual[i] -= residual[i];
    }
    expect_relative_error(actual, expected, relative_tolerance(dtype()), what + " against the CPU");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLinearNeighboursTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_label(info.param)); });

}  // namespace
}  // namespace nanovllm::test
