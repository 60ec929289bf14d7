// The CUDA backend's core ops (everything but attention and sampling) against the CPU ops on
// the same random inputs, in f32, bf16 and f16; plus copies, memory accounting and CUDA graph
// capture/replay.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "cuda_test_util.h"
#include "kernels/backend.h"
#include "kernels/cuda/linear/gemv.h"

namespace nanovllm::test {
namespace {

class CudaOpsTest : public CudaAgainstCpuTest {
 protected:
  CudaOpsTest() { cpu_threads_ = 2; }

  std::vector<int32_t> random_ints(size_t n, int32_t lo, int32_t hi) {
    std::uniform_int_distribution<int32_t> dist(lo, hi);
    std::vector<int32_t> values(n);
    for (int32_t& v : values) v = dist(rng_);
    return values;
  }

  // A device output of the compute dtype, filled with NaN.
  DeviceTensor poisoned(std::initializer_list<int64_t> shape) {
    DeviceTensor out(*gpu_, dtype(), shape);
    poison(*gpu_, out.tensor());
    return out;
  }
};

TEST_P(CudaOpsTest, UploadDownloadRoundTripAndHostReuse) {
  const std::vector<float> values = random(1001, -100.0f, 100.0f);
  std::vector<float> host = values;
  DeviceTensor device = upload_floats(*gpu_, dtype(), {7, 143}, host);
  std::fill(host.begin(), host.end(), 0.0f);  // the upload must not read the host buffer later
  EXPECT_EQ(download_floats(*gpu_, device.tensor()), values);

  std::vector<int32_t> ints = random_ints(257, -1000000, 1000000);
  DeviceTensor device_ints = upload_ints(*gpu_, {257}, ints);
  std::vector<int32_t> back(ints.size(), 0);
  gpu_->download(back.data(), device_ints.tensor());
  EXPECT_EQ(back, ints);
}

// Page-locked host memory: small copies go by a kernel, larger ones by the copy engine
// (enqueue_copy). Sizes of every alignment class (16, 4 and 2 bytes), at offsets that break the
// alignment on the host and on the device side, copied up and back down, with the device
// bytes around each copy left as they were.
TEST(CudaCopyTest, PinnedCopiesOfEveryAlignmentAndSize) {
  NVLLM_REQUIRE_CUDA();
  std::unique_ptr<Backend> gpu = make_cuda_backend(DType::kBF16);
  constexpr int64_t kMost = 48 * 1024;  // bf16 elements: 96 KB, past the kernel's 64 KB
  std::vector<uint16_t> up(kMost + 16);
  std::vector<uint16_t> down(kMost + 16);
  gpu->pin_host_memory(up.data(), up.size() * sizeof(uint16_t));
  gpu->pin_host_memory(down.data(), down.size() * sizeof(uint16_t));
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  OwnedTensor device(DType::kBF16, {kMost + 16}, Device::kCUDA);
  const std::vector<uint16_t> sentinel(kMost + 16, 0xabcd);
  for (const int64_t count :
       {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{9}, int64_t{1001}, int64_t{8192}, kMost}) {
    for (const int64_t host_offset : {0, 1, 2, 8}) {
      for (const int64_t device_offset : {0, 1, 8}) {
        gpu->upload(device.tensor, sentinel.data());
        for (uint16_t& v : up) v = static_cast<uint16_t>(bits(rng));
        const Tensor slice(static_cast<uint16_t*>(device.tensor.data()) + device_offset,
                           DType::kBF16, {count}, Device::kCUDA);
        gpu->wait_for(gpu->upload_async(slice, up.data() + host_offset));
        std::fill(down.begin(), down.end(), uint16_t{0});
        gpu->wait_for(gpu->download_async(down.data() + host_offset, slice));
        const std::string where = fmt::format("{} elements, host offset {}, device offset {}",
                                              count, host_offset, device_offset);
        EXPECT_TRUE(std::equal(up.begin() + host_offset, up.begin() + host_offset + count,
                               down.begin() + host_offset))
            << where;
        std::vector<uint16_t> whole(kMost + 16);
        gpu->download(whole.data(), device.tensor);
        EXPECT_TRUE(std::all_of(whole.begin(), whole.begin() + device_offset, [](uint16_t v) {
          return v == 0xabcd;
        })) << where;
        EXPECT_TRUE(std::all_of(whole.begin() + device_offset + count, whole.end(), [](uint16_t v) {
          return v == 0xabcd;
        })) << where;
      }
    }
  }
  gpu->unpin_host_memory(up.data());
  gpu->unpin_host_memory(down.data());
}

TEST_P(CudaOpsTest, MemoryInfoCountsAllocations) {
  const DeviceMemoryInfo before = gpu_->memory_info();
  EXPECT_GT(before.total, 0u);
  EXPECT_LE(before.free, before.total);
  EXPECT_GE(before.peak_allocated, before.allocated);
  const size_t bytes = (size_t{3} << 20) + 17;
  {
    Buffer buffer(bytes, Device::kCUDA);
    const DeviceMemoryInfo during = gpu_->memory_info();
    EXPECT_EQ(during.allocated, before.allocated + bytes);
    EXPECT_GE(during.peak_allocated, during.allocated);
  }
  const DeviceMemoryInfo after = gpu_->memory_info();
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_GE(after.peak_allocated, before.allocated + bytes);
  gpu_->reset_peak_memory();
  EXPECT_EQ(gpu_->memory_info().peak_allocated, after.allocated);
}

// The whole table (first id 0), and shards of a vocabulary-parallel one: ids of other shards
// get zero rows.
TEST_P(CudaOpsTest, Embedding) {
  for (int64_t hidden : {16, 1024, 1003, 40}) {
    for (int64_t first_id : {0, 20, 74}) {
      const int64_t vocab = 37;
      const int64_t tokens = 13;
      const std::vector<float> weight = random(vocab * hidden);
      const std::vector<int32_t> ids = random_ints(tokens, 0, 3 * vocab - 1);

      OwnedTensor cpu_weight = host_floats({vocab, hidden}, weight);
      OwnedTensor cpu_ids = host_ints({tokens}, ids);
      OwnedTensor cpu_out(DType::kF32, {tokens, hidden});
      cpu_->embedding(cpu_ids.tensor, cpu_weight.tensor, first_id, cpu_out.tensor);

      DeviceTensor gpu_weight = upload_floats(*gpu_, dtype(), {vocab, hidden}, weight);
      DeviceTensor gpu_ids = upload_ints(*gpu_, {tokens}, ids);
      DeviceTensor gpu_out = poisoned({tokens, hidden});
      gpu_->embedding(gpu_ids.tensor(), gpu_weight.tensor(), first_id, gpu_out.tensor());
      // A copy: exact.
      EXPECT_EQ(download_floats(*gpu_, gpu_out.tensor()), values_of(cpu_out.tensor))
          << label("embedding hidden {} from id {}", hidden, first_id);
    }
  }
}

TEST_P(CudaOpsTest, RmsNorm) {
  for (int64_t hidden : {16, 1024, 1003, 4104}) {
    const int64_t rows = 7;
    const std::vector<float> x = random(rows * hidden, -2.0f, 2.0f);
    const std::vector<float> weight = random(hidden, 0.5f, 1.5f);
    const float eps = 1e-6f;

    OwnedTensor cpu_x = host_floats({rows, hidden}, x);
    OwnedTensor cpu_w = host_floats({hidden}, weight);
    OwnedTensor cpu_out(DType::kF32, {rows, hidden});
    cpu_->rms_norm(cpu_x.tensor, cpu_w.tensor, eps, cpu_out.tensor);

    DeviceTensor gpu_x = upload_floats(*gpu_, dtype(), {rows, hidden}, x);
    DeviceTensor gpu_w = upload_floats(*gpu_, dtype(), {hidden}, weight);
    DeviceTensor gpu_out = poisoned({rows, hidden});
    gpu_->rms_norm(gpu_x.tensor(), gpu_w.tensor(), eps, gpu_out.tensor());
    expect_relative_error(download_floats(*gpu_, gpu_out.tensor()), values_of(cpu_out.tensor),
                          tolerance(), label("rms_norm hidden {}", hidden));

    // In place: out is x.
    gpu_->rms_norm(gpu_x.tensor(), gpu_w.tensor(), eps, gpu_x.tensor());
    expect_relative_error(download_floats(*gpu_, gpu_x.tensor()), values_of(cpu_out.tensor),
                          tolerance(), label("rms_norm in place hidden {}", hidden));
  }
}

TEST_P(CudaOpsTest, AddRmsNorm) {
  for (int64_t hidden : {16, 1024, 1003, 4104}) {
    const int64_t rows = 9;
    const std::vector<float> x = random(rows * hidden, -2.0f, 2.0f);
    const std::vector<float> residual = random(rows * hidden, -2.0f, 2.0f);
    const std::vector<float> weight = random(hidden, 0.5f, 1.5f);
    const float eps = 1e-6f;

    OwnedTensor cpu_x = host_floats({rows, hidden}, x);
    OwnedTensor cpu_res = host_floats({rows, hidden}, residual);
    OwnedTensor cpu_w = host_floats({hidden}, weight);
    cpu_->add_rms_norm(cpu_x.tensor, cpu_res.tensor, cpu_w.tensor, eps);

    DeviceTensor gpu_x = upload_floats(*gpu_, dtype(), {rows, hidden}, x);
    DeviceTensor gpu_res = upload_floats(*gpu_, dtype(), {rows, hidden}, residual);
    DeviceTensor gpu_w = upload_floats(*gpu_, dtype(), {hidden}, weight);
    gpu_->add_rms_norm(gpu_x.tensor(), gpu_res.tensor(), gpu_w.tensor(), eps);
    expect_relative_error(download_floats(*gpu_, gpu_res.tensor()), values_of(cpu_res.tensor),
                          tolerance(), label("add_rms_norm residual hidden {}", hidden));
    expect_relative_error(download_floats(*gpu_, gpu_x.tensor()), values_of(cpu_x.tensor),
                          tolerance(), label("add_rms_norm x hidden {}", hidden));
  }
}

struct GemmShape {
  int64_t m, n, k;
};

TEST_P(CudaOpsTest, Linear) {
  for (GemmShape s : {GemmShape{1, 37, 64}, GemmShape{7, 129, 1000}, GemmShape{33, 300, 1023},
                      GemmShape{128, 256, 512}, GemmShape{5, 3, 1}}) {
    const std::vector<float> x = random(s.m * s.k);
    const std::vector<float> w = random(s.n * s.k);
    OwnedTensor cpu_x = host_floats({s.m, s.k}, x);
    OwnedTensor cpu_w = host_floats({s.n, s.k}, w);
    OwnedTensor cpu_out(DType::kF32, {s.m, s.n});
    cpu_->linear(cpu_x.tensor, cpu_w.tensor, cpu_out.tensor);
    const std::vector<float> expected = values_of(cpu_out.tensor);
    const std::string what = fmt::format("{}x{}x{}", s.m, s.n, s.k);

    DeviceTensor gpu_x = upload_floats(*gpu_, dtype(), {s.m, s.k}, x);
    DeviceTensor gpu_w = upload_floats(*gpu_, dtype(), {s.n, s.k}, w);
    DeviceTensor gpu_out = poisoned({s.m, s.n});
    gpu_->linear(gpu_x.tensor(), gpu_w.tensor(), gpu_out.tensor());
    expect_relative_error(download_floats(*gpu_, gpu_out.tensor()), expected, tolerance(),
                          label("linear {}", what));

    // f32 output (the logits): only the summation order differs from the CPU.
    DeviceTensor logits(*gpu_, DType::kF32, {s.m, s.n});
    poison(*gpu_, logits.tensor());
    gpu_->linear(gpu_x.tensor(), gpu_w.tensor(), logits.tensor());
    expect_relative_error(download_floats(*gpu_, logits.tensor()), expected,
                          dtype() == DType::kF32 ? tolerance() : 1e-4,
                          label("linear f32 out {}", what));
  }
}

TEST_P(CudaOpsTest, LinearOnStridedAndOffsetRows) {
  // x is columns [0, k) of rows [1, 1 + m) of a [m + 3, k + 6] matrix: an odd leading
  // dimension larger than k and a start address that is not 16-byte aligned.
  const int64_t m = 11, n = 70, k = 1023, wide = k + 6;
  const std::vector<float> big = random((m + 3) * wide);
  std::vector<float> x(m * k);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < k; ++c) x[r * k + c] = big[(r + 1) * wide + c];
  }
  const std::vector<float> w = random(n * k);
  OwnedTensor cpu_x = host_floats({m, k}, x);
  OwnedTensor cpu_w = host_floats({n, k}, w);
  OwnedTensor cpu_out(DType::kF32, {m, n});
  cpu_->linear(cpu_x.tensor, cpu_w.tensor, cpu_out.tensor);

  DeviceTensor gpu_big = upload_floats(*gpu_, dtype(), {m + 3, wide}, big);
  const Tensor gpu_x = gpu_big.tensor().slice_rows(1, 1 + m).slice_last(0, k);
  DeviceTensor gpu_w = upload_floats(*gpu_, dtype(), {n, k}, w);
  // out is a column slice too: columns [3, 3 + n) of [m, n + 7].
  DeviceTensor gpu_out_big = poisoned({m, n + 7});
  const Tensor gpu_out = gpu_out_big.tensor().slice_last(3, 3 + n);
  gpu_->linear(gpu_x, gpu_w.tensor(), gpu_out);
  const std::vector<float> all = download_floats(*gpu_, gpu_out_big.tensor());
  std::vector<float> actual(m * n);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) actual[r * n + c] = all[r * (n + 7) + 3 + c];
  }
  expect_relative_error(actual, values_of(cpu_out.tensor), tolerance(),
                        label("linear strided/offset"));
  // Columns outside the slice are left alone (still NaN).
  EXPECT_TRUE(std::isnan(all[0]) && std::isnan(all[n + 6]));
}

TEST_P(CudaOpsTest, LinearWithEmptyDepthWritesZeros) {
  const int64_t m = 3, n = 5;
  DeviceTensor gpu_x(*gpu_, dtype(), {m, 0});
  DeviceTensor gpu_w(*gpu_, dtype(), {n, 0});
  DeviceTensor gpu_out = poisoned({m, n});
  gpu_->linear(gpu_x.tensor(), gpu_w.tensor(), gpu_out.tensor());
  EXPECT_EQ(download_floats(*gpu_, gpu_out.tensor()), std::vector<float>(m * n, 0.0f));
}

// Decode batches (1 to 8 rows of x) at the Qwen3-0.6B projection shapes, the LM head's with
// fewer rows: the weight-streaming GEMV for bf16/f16, cuBLASLt for f32. Rows of x are
// independent, so one CPU product over 8 rows serves every batch size.
TEST_P(CudaOpsTest, LinearAtDecodeBatchSizes) {
  constexpr int64_t kMaxBatch = 8;
  for (GemmShape s : {GemmShape{kMaxBatch, 4096, 1024}, GemmShape{kMaxBatch, 1024, 2048},
                      GemmShape{kMaxBatch, 6144, 1024}, GemmShape{kMaxBatch, 1024, 3072},
                      GemmShape{kMaxBatch, 20011, 1024}}) {
    const std::vector<float> x = random(s.m * s.k);
    const std::vector<float> w = random(s.n * s.k);
    OwnedTensor cpu_x = host_floats({s.m, s.k}, x);
    OwnedTensor cpu_w = host_floats({s.n, s.k}, w);
    OwnedTensor cpu_out(DType::kF32, {s.m, s.n});
    cpu_->linear(cpu_x.tensor, cpu_w.tensor, cpu_out.tensor);
    const std::vector<float> all_expected = values_of(cpu_out.tensor);

    DeviceTensor gpu_x = upload_floats(*gpu_, dtype(), {s.m, s.k}, x);
    DeviceTensor gpu_w = upload_floats(*gpu_, dtype(), {s.n, s.k}, w);
    for (int64_t m = 1; m <= kMaxBatch; ++m) {
      const std::vector<float> expected(all_expected.begin(), all_expected.begin() + m * s.n);
      const Tensor x_rows = gpu_x.tensor().slice_rows(0, m);
      const std::string what = fmt::format("{}x{}x{}", m, s.n, s.k);
      DeviceTensor out = poisoned({m, s.n});
      gpu_->linear(x_rows, gpu_w.tensor(), out.tensor());
      expect_relative_error(download_floats(*gpu_, out.tensor()), expected, tolerance(),
                            label("linear {}", what));
      DeviceTensor logits(*gpu_, DType::kF32, {m, s.n});
      poison(*gpu_, logits.tensor());
      gpu_->linear(x_rows, gpu_w.tensor(), logits.tensor());
      expect_relative_error(download_floats(*gpu_, logits.tensor()), expected,
                            dtype() == DType::kF32 ? tolerance() : 1e-4,
                            label("linear f32 out {}", what));
    }
  }
}

// Odd n and k at decode batch sizes, x a column slice of wider rows (16-byte aligned at column
// 8, misaligned at column 3) and out a column slice at column 1; k % 8 != 0 and the misaligned
// x take cuBLASLt. Columns of out outside the slice stay untouched.
TEST_P(CudaOpsTest, LinearAtDecodeBatchSizesOnOddShapesAndSlices) {
  struct Case {
    int64_t m, n, k, x_column;
  };
  std::vector<Case> cases;
  int64_t m = 0;
  for (int64_t n : {1, 7, 1001}) {
    for (int64_t k : {8, 72, 1024, 3072, 20, 1001}) cases.push_back({1 + m++ % 8, n, k, 8});
  }
  cases.push_back({4, 1001, 1024, 3});
  for (const Case& c : cases) {
    const int64_t x_width = c.k + 24;
    const int64_t out_width = c.n + 5;
    const std::vector<float> big_x = random(c.m * x_width);
    std::vector<float> x(c.m * c.k);
    for (int64_t r = 0; r < c.m; ++r) {
      for (int64_t i = 0; i < c.k; ++i) x[r * c.k + i] = big_x[r * x_width + c.x_column + i];
    }
    const std::vector<float> w = random(c.n * c.k);
    OwnedTensor cpu_x = host_floats({c.m, c.k}, x);
    OwnedTensor cpu_w = host_floats({c.n, c.k}, w);
    OwnedTensor cpu_out(DType::kF32, {c.m, c.n});
    cpu_->linear(cpu_x.tensor, cpu_w.tensor, cpu_out.tensor);
    const std::vector<float> expected = values_of(cpu_out.tensor);
    const std::string what = fmt::format("{}x{}x{} x at column {}", c.m, c.n, c.k, c.x_column);

    DeviceTensor gpu_big_x = upload_floats(*gpu_, dtype(), {c.m, x_width}, big_x);
    const Tensor gpu_x = gpu_big_x.tensor().slice_last(c.x_column, c.x_column + c.k);
    DeviceTensor gpu_w = upload_floats(*gpu_, dtype(), {c.n, c.k}, w);
    for (DType out_dtype : {dtype(), DType::kF32}) {
      DeviceTensor big_out(*gpu_, out_dtype, {c.m, out_width});
      poison(*gpu_, big_out.tensor());
      gpu_->linear(gpu_x, gpu_w.tensor(), big_out.tensor().slice_last(1, 1 + c.n));
      const std::vector<float> all = download_floats(*gpu_, big_out.tensor());
      std::vector<float> actual(c.m * c.n);
      for (int64_t r = 0; r < c.m; ++r) {
        for (int64_t i = 0; i < c.n; ++i) actual[r * c.n + i] = all[r * out_width + 1 + i];
        EXPECT_TRUE(std::isnan(all[r * out_width]) && std::isnan(all[r * out_width + 1 + c.n]))
            << label("linear {} wrote outside out", what);
      }
      const bool exact_dtype = out_dtype == dtype() || dtype() == DType::kF32;
      expect_relative_error(actual, expected, exact_dtype ? tolerance() : 1e-4,
                            label("linear {} out {}", what, dtype_name(out_dtype)));
    }
  }
}

// A decode-size linear captured in a graph (k = 2048 takes the GEMV's larger shared-memory
// configuration) replays to what the eager call gives.
TEST_P(CudaOpsTest, LinearAtDecodeBatchSizeReplaysInGraph) {
  const int64_t m = 3, n = 300, k = 2048;
  DeviceTensor x = upload_floats(*gpu_, dtype(), {m, k}, random(m * k));
  DeviceTensor w = upload_floats(*gpu_, dtype(), {n, k}, random(n * k));
  DeviceTensor out = poisoned({m, n});
  auto forward = [&] { gpu_->linear(x.tensor(), w.tensor(), out.tensor()); };
  forward();
  std::unique_ptr<CapturedGraph> graph = gpu_->capture(forward);
  ASSERT_NE(graph, nullptr);
  upload_into(*gpu_, x.tensor(), random(m * k));
  poison(*gpu_, out.tensor());
  graph->replay();
  const std::vector<float> replayed = download_floats(*gpu_, out.tensor());
  poison(*gpu_, out.tensor());
  forward();
  const std::vector<float> eager = download_floats(*gpu_, out.tensor());
  ASSERT_EQ(std::count_if(eager.begin(), eager.end(), [](float v) { return std::isnan(v); }), 0);
  EXPECT_EQ(replayed, eager) << label("linear replay");
}

// With the norm weights (Qwen3), and without them (rotary only: Llama, Qwen2).
TEST_P(CudaOpsTest, QkNormRope) {
  for (bool with_norm : {true, false})
    for (AttentionDims dims :
         {AttentionDims{4, 2, 64}, AttentionDims{16, 8, 128}, AttentionDims{6, 3, 128},
          AttentionDims{3, 1, 16}, AttentionDims{2, 2, 6}}) {
      const int64_t tokens = 11;
      const int max_positions = 50;
      const int64_t width = dims.qkv_size();
      const std::vector<float> qkv = random(tokens * width, -2.0f, 2.0f);
      const std::vector<float> q_norm = random(dims.head_dim, 0.5f, 1.5f);
      const std::vector<float> k_norm = random(dims.head_dim, 0.5f, 1.5f);
      const std::vector<int32_t> positions = random_ints(tokens, 0, max_positions - 1);
      const std::vector<float> table = rotary_table(max_positions, dims.head_dim);
      const float eps = 1e-6f;

      OwnedTensor cpu_qkv = host_floats({tokens, width}, qkv);
      OwnedTensor cpu_qn = host_floats({dims.head_dim}, q_norm);
      OwnedTensor cpu_kn = host_floats({dims.head_dim}, k_norm);
      OwnedTensor cpu_pos = host_ints({tokens}, positions);
      OwnedTensor cpu_table = host_floats({max_positions, dims.head_dim}, table);
      cpu_->qk_norm_rope(cpu_qkv.tensor, with_norm ? cpu_qn.tensor : Tensor(),
                         with_norm ? cpu_kn.tensor : Tensor(), cpu_pos.tensor, cpu_table.tensor,
                         eps, dims);

      DeviceTensor gpu_qkv = upload_floats(*gpu_, dtype(), {tokens, width}, qkv);
      DeviceTensor gpu_qn = upload_floats(*gpu_, dtype(), {dims.head_dim}, q_norm);
      DeviceTensor gpu_kn = upload_floats(*gpu_, dtype(), {dims.head_dim}, k_norm);
      DeviceTensor gpu_pos = upload_ints(*gpu_, {tokens}, positions);
      DeviceTensor gpu_table =
          upload_floats(*gpu_, DType::kF32, {max_positions, dims.head_dim}, table);
      gpu_->qk_norm_rope(gpu_qkv.tensor(), with_norm ? gpu_qn.tensor() : Tensor(),
                         with_norm ? gpu_kn.tensor() : Tensor(), gpu_pos.tensor(),
                         gpu_table.tensor(), eps, dims);
      const std::vector<float> actual = download_floats(*gpu_, gpu_qkv.tensor());
      const std::vector<float> expected = values_of(cpu_qkv.tensor);
      const std::string what =
          fmt::format("heads {}/{} head_dim {}{}", dims.num_heads, dims.num_kv_heads, dims.head_dim,
                      with_norm ? "" : " without norm");
      expect_relative_error(actual, expected, tolerance(), label("qk_norm_rope {}", what));
      // The v heads are untouched.
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t c = dims.q_size() + dims.kv_size(); c < width; ++c) {
          ASSERT_EQ(actual[t * width + c], qkv[t * width + c]) << label("v head {}", what);
        }
      }
    }
}

// linear_bias at the GEMV's row counts and cuBLASLt's (k = 1000 takes cuBLASLt at any), the
// bias in the GEMM's epilogue, and, misaligned, added by add_bias after it: the CPU's linear,
// then add_bias, in f32.
TEST_P(CudaOpsTest, LinearBias) {
  for (GemmShape s : {GemmShape{1, 1001, 1024}, GemmShape{3, 7, 64}, GemmShape{8, 1001, 1024},
                      GemmShape{9, 1001, 1024}, GemmShape{5, 300, 1000}, GemmShape{40, 4608, 512},
                      GemmShape{300, 129, 1024}}) {
    const std::vector<float> x = random(s.m * s.k);
    const std::vector<float> w = random(s.n * s.k);
    const std::vector<float> bias = random(s.n, -4.0f, 4.0f);
    OwnedTensor cpu_x = host_floats({s.m, s.k}, x);
    OwnedTensor cpu_w = host_floats({s.n, s.k}, w);
    OwnedTensor cpu_bias = host_floats({s.n}, bias);
    OwnedTensor cpu_out(DType::kF32, {s.m, s.n});
    cpu_->linear(cpu_x.tensor, cpu_w.tensor, cpu_out.tensor);
    cpu_->add_bias(cpu_out.tensor, cpu_bias.tensor);
    const std::vector<float> expected = values_of(cpu_out.tensor);

    DeviceTensor gpu_x = upload_floats(*gpu_, dtype(), {s.m, s.k}, x);
    DeviceTensor gpu_w = upload_floats(*gpu_, dtype(), {s.n, s.k}, w);
    // At offset 0 the allocation's alignment; at offset 1 an element past it.
    DeviceTensor gpu_bias = upload_floats(*gpu_, dtype(), {s.n}, bias);
    std::vector<float> shifted(1, 0.0f);
    shifted.insert(shifted.end(), bias.begin(), bias.end());
    DeviceTensor shifted_bias = upload_floats(*gpu_, dtype(), {s.n + 1}, shifted);
    for (int offset : {0, 1}) {
      const Tensor b =
          offset == 0 ? gpu_bias.tensor() : shifted_bias.tensor().slice_rows(1, s.n + 1);
      DeviceTensor gpu_out = poisoned({s.m, s.n});
      gpu_->linear_bias(gpu_x.tensor(), gpu_w.tensor(), b, gpu_out.tensor());
      expect_relative_error(
          download_floats(*gpu_, gpu_out.tensor()), expected, tolerance(),
          label("linear_bias {}x{}x{}, bias at offset {}", s.m, s.n, s.k, offset));
    }
  }
  // The bias is of the compute dtype and goes into an out of it.
  DeviceTensor x = upload_floats(*gpu_, dtype(), {2, 64}, random(128));
  DeviceTensor w = upload_floats(*gpu_, dtype(), {16, 64}, random(1024));
  DeviceTensor bias = upload_floats(*gpu_, dtype(), {16}, random(16));
  DeviceTensor f32_out(*gpu_, DType::kF32, {2, 16});
  if (dtype() != DType::kF32) {
    EXPECT_THROW(gpu_->linear_bias(x.tensor(), w.tensor(), bias.tensor(), f32_out.tensor()), Error);
  }
  DeviceTensor out = poisoned({2, 16});
  EXPECT_THROW(
      gpu_->linear_bias(x.tensor(), w.tensor(), bias.tensor().slice_rows(0, 15), out.tensor()),
      Error);
}

// A linear's bias on rows of odd widths, vectorized and not.
TEST_P(CudaOpsTest, AddBias) {
  for (int64_t width : {1, 7, 64, 1000, 3072}) {
    const int64_t rows = 5;
    const std::vector<float> x = random(rows * width, -2.0f, 2.0f);
    const std::vector<float> bias = random(width, -1.0f, 1.0f);
    OwnedTensor cpu_x = host_floats({rows, width}, x);
    OwnedTensor cpu_bias = host_floats({width}, bias);
    cpu_->add_bias(cpu_x.tensor, cpu_bias.tensor);
    DeviceTensor gpu_x = upload_floats(*gpu_, dtype(), {rows, width}, x);
    DeviceTensor gpu_bias = upload_floats(*gpu_, dtype(), {width}, bias);
    gpu_->add_bias(gpu_x.tensor(), gpu_bias.tensor());
    expect_relative_error(download_floats(*gpu_, gpu_x.tensor()), values_of(cpu_x.tensor),
                          tolerance(), label("add_bias width {}", width));
  }
}

TEST_P(CudaOpsTest, StoreKv) {
  for (AttentionDims dims :
       {AttentionDims{4, 2, 64}, AttentionDims{16, 8, 128}, AttentionDims{2, 1, 6}}) {
    const int64_t tokens = 9;
    const int64_t num_blocks = 5;
    const int64_t block_size = 4;
    const int64_t width = dims.qkv_size();
    const std::vector<float> qkv = random(tokens * width);
    const int64_t cache_elements = num_blocks * block_size * dims.kv_size();
    const std::vector<float> k_init = random(cache_elements);
    const std::vector<float> v_init = random(cache_elements);
    // Distinct slots in shuffled order, with two rows skipped.
    std::vector<int32_t> slots(num_blocks * block_size);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng_);
    slots.resize(tokens);
    slots[1] = -1;
    slots[6] = -1;

    AttentionMetadata cpu_meta;
    OwnedTensor cpu_slots = host_ints({tokens}, slots);
    cpu_meta.slot_mapping = cpu_slots.tensor;
    OwnedTensor cpu_qkv = host_floats({tokens, width}, qkv);
    OwnedTensor cpu_k =
        host_floats({num_blocks, block_size, dims.num_kv_heads, dims.head_dim}, k_init);
    OwnedTensor cpu_v =
        host_floats({num_blocks, block_size, dims.num_kv_heads, dims.head_dim}, v_init);
    cpu_->store_kv(cpu_qkv.tensor, {cpu_k.tensor, cpu_v.tensor}, cpu_meta, dims);

    AttentionMetadata gpu_meta;
    DeviceTensor gpu_slots = upload_ints(*gpu_, {tokens}, slots);
    gpu_meta.slot_mapping = gpu_slots.tensor();
    DeviceTensor gpu_qkv = upload_floats(*gpu_, dtype(), {tokens, width}, qkv);
    DeviceTensor gpu_k = upload_floats(
        *gpu_, dtype(), {num_blocks, block_size, dims.num_kv_heads, dims.head_dim}, k_init);
    DeviceTensor gpu_v = upload_floats(
        *gpu_, dtype(), {num_blocks, block_size, dims.num_kv_heads, dims.head_dim}, v_init);
    gpu_->store_kv(gpu_qkv.tensor(), {gpu_k.tensor(), gpu_v.tensor()}, gpu_meta, dims);
    EXPECT_EQ(download_floats(*gpu_, gpu_k.tensor()), values_of(cpu_k.tensor))
        << label("k cache head_dim {}", dims.head_dim);
    EXPECT_EQ(download_floats(*gpu_, gpu_v.tensor()), values_of(cpu_v.tensor))
        << label("v cache head_dim {}", dims.head_dim);
  }
}

TEST_P(CudaOpsTest, SiluMul) {
  for (int64_t width : {16, 1000, 1001, 3072}) {
    const int64_t rows = 13;
    const std::vector<float> gate_up = random(rows * 2 * width, -6.0f, 6.0f);
    OwnedTensor cpu_in = host_floats({rows, 2 * width}, gate_up);
    OwnedTensor cpu_out(DType::kF32, {rows, width});
    cpu_->silu_mul(cpu_in.tensor, cpu_out.tensor);

    DeviceTensor gpu_in = upload_floats(*gpu_, dtype(), {rows, 2 * width}, gate_up);
    DeviceTensor gpu_out = poisoned({rows, width});
    gpu_->silu_mul(gpu_in.tensor(), gpu_out.tensor());
    expect_relative_error(download_floats(*gpu_, gpu_out.tensor()), values_of(cpu_out.tensor),
                          tolerance(), label("silu_mul width {}", width));
  }
}

TEST_P(CudaOpsTest, GatherRows) {
  for (int64_t width : {1024, 1001, 8}) {
    const int64_t rows = 20;
    const int64_t count = 7;
    const std::vector<float> x = random(rows * width);
    std::vector<int32_t> indices = random_ints(count, 0, rows - 1);
    indices[3] = indices[0];  // a repeated row
    OwnedTensor cpu_x = host_floats({rows, width}, x);
    OwnedTensor cpu_idx = host_ints({count}, indices);
    OwnedTensor cpu_out(DType::kF32, {count, width});
    cpu_->gather_rows(cpu_x.tensor, cpu_idx.tensor, cpu_out.tensor);

    DeviceTensor gpu_x = upload_floats(*gpu_, dtype(), {rows, width}, x);
    DeviceTensor gpu_idx = upload_ints(*gpu_, {count}, indices);
    DeviceTensor gpu_out = poisoned({count, width});
    gpu_->gather_rows(gpu_x.tensor(), gpu_idx.tensor(), gpu_out.tensor());
    EXPECT_EQ(download_floats(*gpu_, gpu_out.tensor()), values_of(cpu_out.tensor))
        << label("gather_rows width {}", width);
  }
}

// Kernels cannot throw: ids, positions and indices the engine would never pass are written as
// zeros (and cache slots past the end are skipped) instead of being read or written out of
// bounds.
TEST_P(CudaOpsTest, OutOfRangeIndicesAreHarmless) {
  const int64_t vocab = 10, hidden = 24;
  DeviceTensor weight = upload_floats(*gpu_, dtype(), {vocab, hidden}, random(vocab * hidden));
  DeviceTensor ids = upload_ints(*gpu_, {2}, {-1, static_cast<int32_t>(vocab)});
  DeviceTensor out = poisoned({2, hidden});
  gpu_->embedding(ids.tensor(), weight.tensor(), 0, out.tensor());
  EXPECT_EQ(download_floats(*gpu_, out.tensor()), std::vector<float>(2 * hidden, 0.0f));

  DeviceTensor indices = upload_ints(*gpu_, {2}, {-5, static_cast<int32_t>(vocab)});
  DeviceTensor gathered = poisoned({2, hidden});
  gpu_->gather_rows(weight.tensor(), indices.tensor(), gathered.tensor());
  EXPECT_EQ(download_floats(*gpu_, gathered.tensor()), std::vector<float>(2 * hidden, 0.0f));

  const AttentionDims dims{2, 1, 8};
  DeviceTensor qkv = upload_floats(*gpu_, dtype(), {1, dims.qkv_size()}, random(dims.qkv_size()));
  DeviceTensor norm = upload_floats(*gpu_, dtype(), {dims.head_dim}, random(dims.head_dim));
  DeviceTensor table = upload_floats(*gpu_, DType::kF32, {4, dims.head_dim}, rotary_table(4, 8));
  DeviceTensor position = upload_ints(*gpu_, {1}, {4});
  gpu_->qk_norm_rope(qkv.tensor(), norm.tensor(), norm.tensor(), position.tensor(), table.tensor(),
                     1e-6f, dims);
  const std::vector<float> rotated = download_floats(*gpu_, qkv.tensor());
  for (int c = 0; c < dims.q_size() + dims.kv_size(); ++c) EXPECT_EQ(rotated[c], 0.0f) << c;

  const std::vector<float> k_init = random(2 * 2 * dims.kv_size());
  DeviceTensor k = upload_floats(*gpu_, dtype(), {2, 2, 1, 8}, k_init);
  DeviceTensor v = upload_floats(*gpu_, dtype(), {2, 2, 1, 8}, k_init);
  AttentionMetadata meta;
  DeviceTensor slots = upload_ints(*gpu_, {1}, {4});  // 4 slots: 0..3
  meta.slot_mapping = slots.tensor();
  gpu_->store_kv(qkv.tensor(), {k.tensor(), v.tensor()}, meta, dims);
  EXPECT_EQ(download_floats(*gpu_, k.tensor()), k_init);
  EXPECT_EQ(download_floats(*gpu_, v.tensor()), k_init);
}

TEST_P(CudaOpsTest, RejectsTensorsOfTheWrongDeviceDtypeOrShape) {
  OwnedTensor host_x(DType::kF32, {2, 8});
  OwnedTensor host_w(DType::kF32, {8});
  DeviceTensor x(*gpu_, dtype(), {2, 8});
  DeviceTensor w(*gpu_, dtype(), {8});
  DeviceTensor wrong_w(*gpu_, dtype(), {9});
  DeviceTensor ints(*gpu_, DType::kI32, {2, 8});
  EXPECT_THROW(gpu_->rms_norm(host_x.tensor, w.tensor(), 1e-6f, x.tensor()), Error);
  EXPECT_THROW(gpu_->rms_norm(x.tensor(), host_w.tensor, 1e-6f, x.tensor()), Error);
  EXPECT_THROW(gpu_->rms_norm(x.tensor(), wrong_w.tensor(), 1e-6f, x.tensor()), Error);
  EXPECT_THROW(gpu_->rms_norm(ints.tensor(), w.tensor(), 1e-6f, x.tensor()), Error);
  EXPECT_THROW(gpu_->add_rms_norm(x.tensor(), x.tensor(), w.tensor(), 1e-6f), Error);
  DeviceTensor odd(*gpu_, dtype(), {2, 7});
  EXPECT_THROW(gpu_->silu_mul(odd.tensor(), x.tensor()), Error);
  DeviceTensor i64(*gpu_, DType::kI64, {2, 8});
  EXPECT_THROW(gpu_->linear(x.tensor(), x.tensor(), i64.tensor()), Error);
}

// Captures embedding -> rms_norm -> linear -> silu_mul -> gather_rows once; replaying after new
// inputs are uploaded must give exactly what running the same ops eagerly gives.
TEST_P(CudaOpsTest, CaptureReplayMatchesEagerRun) {
  const int64_t vocab = 50, hidden = 64, inter = 96, tokens = 9, rows = 3;
  DeviceTensor embed = upload_floats(*gpu_, dtype(), {vocab, hidden}, random(vocab * hidden));
  DeviceTensor norm = upload_floats(*gpu_, dtype(), {hidden}, random(hidden, 0.5f, 1.5f));
  DeviceTensor proj =
      upload_floats(*gpu_, dtype(), {2 * inter, hidden}, random(2 * inter * hidden));
  DeviceTensor ids(*gpu_, DType::kI32, {tokens});
  DeviceTensor picks(*gpu_, DType::kI32, {rows});
  DeviceTensor x(*gpu_, dtype(), {tokens, hidden});
  DeviceTensor h(*gpu_, dtype(), {tokens, hidden});
  DeviceTensor gate_up(*gpu_, dtype(), {tokens, 2 * inter});
  DeviceTensor act(*gpu_, dtype(), {tokens, inter});
  DeviceTensor out(*gpu_, dtype(), {rows, inter});
  auto forward = [&] {
    gpu_->embedding(ids.tensor(), embed.tensor(), 0, x.tensor());
    gpu_->rms_norm(x.tensor(), norm.tensor(), 1e-6f, h.tensor());
    gpu_->linear(h.tensor(), proj.tensor(), gate_up.tensor());
    gpu_->silu_mul(gate_up.tensor(), act.tensor());
    gpu_->gather_rows(act.tensor(), picks.tensor(), out.tensor());
  };

  // Warm up eagerly (the GEMM picks its algorithm), then capture.
  gpu_->upload(ids.tensor(), random_ints(tokens, 0, vocab - 1).data());
  gpu_->upload(picks.tensor(), random_ints(rows, 0, tokens - 1).data());
  forward();
  std::unique_ptr<CapturedGraph> graph = gpu_->capture(forward);
  ASSERT_NE(graph, nullptr);

  for (int round = 0; round < 3; ++round) {
    const std::vector<int32_t> new_ids = random_ints(tokens, 0, vocab - 1);
    const std::vector<int32_t> new_picks = random_ints(rows, 0, tokens - 1);
    gpu_->upload(ids.tensor(), new_ids.data());
    gpu_->upload(picks.tensor(), new_picks.data());
    poison(*gpu_, out.tensor());
    graph->replay();
    const std::vector<float> replayed = download_floats(*gpu_, out.tensor());
    poison(*gpu_, out.tensor());
    forward();
    const std::vector<float> eager = download_floats(*gpu_, out.tensor());
    ASSERT_EQ(std::count_if(eager.begin(), eager.end(), [](float v) { return std::isnan(v); }), 0);
    EXPECT_EQ(replayed, eager) << label("replay round {}", round);
  }
}

TEST_P(CudaOpsTest, CaptureEndsCleanlyWhenTheBodyThrows) {
  DeviceTensor t = upload_floats(*gpu_, dtype(), {4}, random(4));
  EXPECT_THROW(gpu_->capture([] { throw Error("body failed"); }), Error);
  // Copies are not allowed inside a capture; the error is clear and the capture is ended.
  const std::vector<float> values(4, 1.0f);
  EXPECT_THROW(gpu_->capture([&] { gpu_->upload(t.tensor(), values.data()); }), Error);
  // The stream works normally afterwards.
  const std::vector<float> fresh = random(4);
  DeviceTensor u = upload_floats(*gpu_, dtype(), {4}, fresh);
  EXPECT_EQ(download_floats(*gpu_, u.tensor()), fresh);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOpsTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_label(info.param));
                         });

TEST(CudaBackendTest, RejectsUnsupportedComputeDtypes) {
  // Refused before the device is looked at, so this holds on machines without a GPU too.
  for (DType dtype : {DType::kI32, DType::kI64}) {
    try {
      make_cuda_backend(dtype);
      ADD_FAILURE() << "no error for " << dtype_name(dtype);
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(dtype_name(dtype)), std::string::npos)
          << error.what();
    }
  }
}

// Which operands linear() sends to the GEMV rather than cuBLASLt (host-side; no device needed).
TEST(GemvTest, TakesDecodeOperandsAndLeavesTheRestToCublasLt) {
  const auto address = [](uintptr_t value) { return reinterpret_cast<void*>(value); };
  cuda::GemvArgs decode;  // a batch-4 down projection, bf16
  decode.x = address(0x10000);
  decode.ldx = 3072;
  decode.weight = address(0x20000);
  decode.ldw = 3072;
  decode.out = address(0x30002);  // out needs no alignment
  decode.ldo = 1027;
  decode.m = 4;
  decode.n = 1024;
  decode.k = 3072;
  EXPECT_TRUE(cuda::gemv_supported(decode));

  auto with = [&](auto change) {
    cuda::GemvArgs args = decode;
    change(args);
    return cuda::gemv_supported(args);
  };
  EXPECT_TRUE(with([](cuda::GemvArgs& a) { a.in_dtype = a.out_dtype = DType::kF16; }));
  EXPECT_TRUE(with([](cuda::GemvArgs& a) { a.out_dtype = DType::kF32; }));
  EXPECT_TRUE(with([](cuda::GemvArgs& a) { a.m = 8; }));
  EXPECT_TRUE(with([](cuda::GemvArgs& a) {
    a.m = 1;
    a.ldx = 3;  // a single row's stride is never used
  }));
  EXPECT_TRUE(with([](cuda::GemvArgs& a) { a.ldx = 4096; }));
  EXPECT_FALSE(with([](cuda::GemvArgs& a) { a.m = 9; }));
  EXPECT_FALSE(with([](cuda::GemvArgs& a) { a.in_dtype = a.out_dtype = DType::kF32; }));
  EXPECT_FALSE(with([](cuda::GemvArgs& a) { a.out_dtype = DType::kF16; }));  // bf16 inputs
  EXPECT_FALSE(with([](cuda::GemvArgs& a) {
    a.k = 3071;
    a.ldx = a.ldw = 3071;
  }));
  EXPECT_FALSE(with([&](cuda::GemvArgs& a) { a.x = address(0x10008); }));
  EXPECT_FALSE(with([&](cuda::GemvArgs& a) { a.weight = address(0x20002); }));
  EXPECT_FALSE(with([](cuda::GemvArgs& a) { a.ldx = 3076; }));
  EXPECT_FALSE(with([](cuda::GemvArgs& a) { a.ldw = 3076; }));

  // What rides along: a norm over at most kGemvMaxNormWidth, SiLU into the input dtype (x then
  // 2k wide), the residual add after either but the norm.
  const auto norm = [&](cuda::GemvArgs& a) { a.norm_weight = address(0x40000); };
  const auto silu = [](cuda::GemvArgs& a) { a.silu_gate = true; };
  const auto residual = [&](cuda::GemvArgs& a) { a.residual = a.out; };
  EXPECT_TRUE(with(norm));
  EXPECT_TRUE(with([&](cuda::GemvArgs& a) { norm(a), a.out_dtype = DType::kF32; }));
  EXPECT_FALSE(with([&](cuda::GemvArgs& a) { norm(a), a.norm_weight = address(0x40008); }));
  EXPECT_FALSE(
      with([&](cuda::GemvArgs& a) { norm(a), a.k = a.ldx = a.ldw = cuda::kGemvMaxNormWidth + 8; }));
  EXPECT_TRUE(with([&](cuda::GemvArgs& a) { silu(a), a.ldx = 2 * 3072; }));
  EXPECT_FALSE(with(silu));  // rows 3072 apart cannot hold [gate | up]
  EXPECT_FALSE(
      with([&](cuda::GemvArgs& a) { silu(a), a.ldx = 2 * 3072, a.out_dtype = DType::kF32; }));
  EXPECT_FALSE(with([&](cuda::GemvArgs& a) { silu(a), norm(a), a.ldx = 2 * 3072; }));
  EXPECT_TRUE(with(residual));
  EXPECT_TRUE(with([&](cuda::GemvArgs& a) { residual(a), silu(a), a.ldx = 2 * 3072; }));
  EXPECT_FALSE(with([&](cuda::GemvArgs& a) { residual(a), norm(a); }));
  EXPECT_FALSE(with([&](cuda::GemvArgs& a) { residual(a), a.out_dtype = DType::kF32; }));
  // A bias, at any alignment, with a plain or normalized input but not the residual add.
  const auto bias = [&](cuda::GemvArgs& a) { a.bias = address(0x60002); };
  EXPECT_TRUE(with(bias));
  EXPECT_TRUE(with([&](cuda::GemvArgs& a) { bias(a), norm(a); }));
  EXPECT_FALSE(with([&](cuda::GemvArgs& a) { bias(a), residual(a); }));
}

TEST(CudaBackendTest, AvailabilityMatchesBackendCreation) {
  if (cuda_available()) {
    EXPECT_NO_THROW(make_cuda_backend(DType::kBF16));
  } else {
    EXPECT_THROW(make_cuda_backend(DType::kBF16), Error);
  }
}

}  // namespace
}  // namespace nanovllm::test
