// The CUDA backend's mixture-of-experts ops (moe_route, moe_experts) against the CPU ops on the
// same random inputs, in f32, bf16 and f16: odd widths and real ones (Qwen3-30B-A3B), batches
// from one row to thousands (the three tile shapes of the mma.sync grouped GEMMs, the CUTLASS ones
// that bf16 takes at prefill sizes, and the per-pair path),
// skewed routing (one expert takes every row, most experts idle), ids outside the experts,
// ties in the router, bit-exact repeats, graph replays and batch invariance, and the next
// add_rms_norm folded into the experts bit for bit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "cuda_test_util.h"
#include "kernels/backend.h"
#include "kernels/cuda/moe/moe.h"

namespace nanovllm::test {
namespace {

// The experts' weights of one geometry, on the host for the CPU op and on the device.
struct ExpertWeights {
  int64_t hidden = 0, intermediate = 0, experts = 0;
  OwnedTensor cpu_gate_up;  // [experts, 2 intermediate, hidden]
  OwnedTensor cpu_down;     // [experts, hidden, intermediate]
  std::unique_ptr<DeviceTensor> gpu_gate_up, gpu_down;
};

// A batch's operands, as host values (already rounded to the compute dtype).
struct Batch {
  int64_t rows = 0, top_k = 0;
  std::vector<float> x;        // [rows, hidden]
  std::vector<int32_t> ids;    // [rows, top_k], may hold ids outside [0, experts)
  std::vector<float> weights;  // [rows, top_k]
};

class CudaMoeTest : public CudaAgainstCpuTest {
 protected:
  CudaMoeTest() { rng_.seed(20250611); }

  // The same from a cheaper generator (xorshift64*), for the hundreds of millions of weights of
  // the real widths.
  std::vector<float> fast_random(size_t n, float lo, float hi) {
    uint64_t state = (static_cast<uint64_t>(rng_()) << 32 | rng_()) | 1u;
    std::vector<float> values(n);
    for (float& v : values) {
      state ^= state >> 12;
      state ^= state << 25;
      state ^= state >> 27;
      const float unit = static_cast<float>((state * 2685821657736338717ull) >> 40) * 0x1p-24f;
      v = lo + (hi - lo) * unit;
    }
    return round_to(dtype(), std::move(values));
  }

  // Per row, top_k distinct experts in random order.
  std::vector<int32_t> random_ids(int64_t rows, int64_t experts, int64_t top_k) {
    std::vector<int32_t> ids(static_cast<size_t>(rows * top_k));
    std::vector<int32_t> order(static_cast<size_t>(experts));
    for (int64_t r = 0; r < rows; ++r) {
      std::iota(order.begin(), order.end(), 0);
      for (int64_t j = 0; j < top_k; ++j) {
        std::uniform_int_distribution<int64_t> pick(j, experts - 1);
        std::swap(order[j], order[pick(rng_)]);
        ids[r * top_k + j] = order[j];
      }
    }
    return ids;
  }

  // Random weights scaled so that every product stays near 1 (f16 has room).
  std::unique_ptr<ExpertWeights> make_weights(int64_t hidden, int64_t intermediate,
                                              int64_t experts) {
    auto w = std::make_unique<ExpertWeights>();
    w->hidden = hidden;
    w->intermediate = intermediate;
    w->experts = experts;
    const float gate_up_scale = 2.0f / std::sqrt(static_cast<float>(hidden));
    const float down_scale = 2.0f / std::sqrt(static_cast<float>(intermediate));
    const std::vector<float> gate_up =
        fast_random(experts * 2 * intermediate * hidden, -gate_up_scale, gate_up_scale);
    w->cpu_gate_up = host_floats({experts, 2 * intermediate, hidden}, gate_up);
    w->gpu_gate_up = std::make_unique<DeviceTensor>(
        upload_floats(*gpu_, dtype(), {experts, 2 * intermediate, hidden}, gate_up));
    const std::vector<float> down =
        fast_random(experts * hidden * intermediate, -down_scale, down_scale);
    w->cpu_down = host_floats({experts, hidden, intermediate}, down);
    w->gpu_down = std::make_unique<DeviceTensor>(
        upload_floats(*gpu_, dtype(), {experts, hidden, intermediate}, down));
    return w;
  }

  Batch make_batch(const ExpertWeights& w, int64_t rows, int64_t top_k) {
    Batch b;
    b.rows = rows;
    b.top_k = top_k;
    b.x = random(rows * w.hidden);
    b.ids = random_ids(rows, w.experts, top_k);
    b.weights = random(rows * top_k, 0.0f, 1.0f);
    return b;
  }

  static std::string name(const ExpertWeights& w, const Batch& b) {
    return fmt::format("T {} H {} I {} E {} k {}", b.rows, w.hidden, w.intermediate, w.experts,
                       b.top_k);
  }

  // The CPU op's output; ids outside the experts are given weight 0 (the CPU rejects them,
  // the GPU leaves them out).
  std::vector<float> cpu_experts(const ExpertWeights& w, const Batch& b) {
    std::vector<int32_t> ids = b.ids;
    std::vector<float> weights = b.weights;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= w.experts) {
        ids[i] = 0;
        weights[i] = 0.0f;
      }
    }
    OwnedTensor x = host_floats({b.rows, w.hidden}, b.x);
    OwnedTensor id = host_ints({b.rows, b.top_k}, ids);
    OwnedTensor weight = host_floats({b.rows, b.top_k}, weights);
    OwnedTensor out(DType::kF32, {b.rows, w.hidden});
    cpu_->moe_experts(x.tensor, id.tensor, weight.tensor, w.cpu_gate_up.tensor, w.cpu_down.tensor,
                      out.tensor);
    return values_of(out.tensor);
  }

  // A batch on the device, and moe_experts on it.
  struct DeviceBatch {
    DeviceTensor x, ids, weights, out;
  };
  DeviceBatch upload(const ExpertWeights& w, const Batch& b) {
    DeviceBatch d{upload_floats(*gpu_, dtype(), {b.rows, w.hidden}, b.x),
                  upload_ints(*gpu_, {b.rows, b.top_k}, b.ids),
                  upload_floats(*gpu_, DType::kF32, {b.rows, b.top_k}, b.weights),
                  DeviceTensor(*gpu_, dtype(), {b.rows, w.hidden})};
    poison(*gpu_, d.out.tensor());
    return d;
  }
  void run(const ExpertWeights& w, DeviceBatch& d) {
    gpu_->moe_experts(d.x.tensor(), d.ids.tensor(), d.weights.tensor(), w.gpu_gate_up->tensor(),
                      w.gpu_down->tensor(), d.out.tensor());
  }
  // Replays `graph` (captured over run(w, d)) on d's current operands and returns its output,
  // which must be the same bits as an eager run on them.
  std::vector<float> replay_as_eager(CapturedGraph& graph, const ExpertWeights& w, DeviceBatch& d,
                                     const std::string& what) {
    poison(*gpu_, d.out.tensor());
    graph.replay();
    const std::vector<float> replayed = download_floats(*gpu_, d.out.tensor());
    poison(*gpu_, d.out.tensor());
    run(w, d);
    EXPECT_EQ(replayed, download_floats(*gpu_, d.out.tensor())) << what;
    return replayed;
  }
  std::vector<float> gpu_experts(const ExpertWeights& w, const Batch& b) {
    DeviceBatch d = upload(w, b);
    run(w, d);
    return download_floats(*gpu_, d.out.tensor());
  }

  void expect_experts_match(const ExpertWeights& w, const Batch& b, const std::string& what) {
    expect_relative_error(gpu_experts(w, b), cpu_experts(w, b), tolerance(),
                          label("moe_experts {} {}", what, name(w, b)));
  }

  // A batch of `rows` (top 4) where about a quarter of the ids lie outside the experts (one
  // past the last among them) and row 0 has none inside: row 0 comes out zero, the rest as on
  // the CPU.
  void expect_ids_outside_left_out(const ExpertWeights& w, int64_t rows) {
    Batch b = make_batch(w, rows, 4);
    std::uniform_int_distribution<int> coin(0, 3);
    const int32_t bad[] = {-1, static_cast<int32_t>(w.experts), 1000, INT_MIN, INT_MAX};
    for (size_t i = 0; i < b.ids.size(); ++i) {
      if (coin(rng_) == 0) b.ids[i] = bad[i % std::size(bad)];
    }
    for (int64_t j = 0; j < 4; ++j) b.ids[j] = -1;  // row 0: none inside
    const std::vector<float> out = gpu_experts(w, b);
    for (int64_t h = 0; h < w.hidden; ++h) {
      ASSERT_EQ(out[h], 0.0f) << label("row 0, column {}", h);
    }
    expect_relative_error(out, cpu_experts(w, b), tolerance(),
                          label("moe_experts with bad ids {}", name(w, b)));
  }
};

// out may be x (the model writes the experts' output over their input): the same bits as into
// another tensor, at decode sizes, prefill sizes and on the per-pair path (widths not multiples
// of 8).
TEST_P(CudaMoeTest, OutputOverTheInputGivesTheSameBits) {
  for (const auto& [hidden, intermediate] : {std::pair<int64_t, int64_t>{136, 72}, {30, 20}}) {
    const std::unique_ptr<ExpertWeights> w = make_weights(hidden, intermediate, 16);
    for (int64_t rows : {3, 700}) {
      const Batch b = make_batch(*w, rows, 4);
      DeviceBatch d = upload(*w, b);
      run(*w, d);
      const std::vector<float> expected = download_floats(*gpu_, d.out.tensor());
      gpu_->moe_experts(d.x.tensor(), d.ids.tensor(), d.weights.tensor(), w->gpu_gate_up->tensor(),
                        w->gpu_down->tensor(), d.x.tensor());
      EXPECT_EQ(download_floats(*gpu_, d.x.tensor()), expected) << label("{}", name(*w, b));
    }
  }
}

// The next add_rms_norm folded into the experts' last step: the same bits in out and in the
// residual as moe_experts, then add_rms_norm, on every path: 16-row tiles (3 rows), 32-row ones
// (80), the prefill tiles (700; CUTLASS's in bf16) and the per-pair kernels (widths not
// multiples of 8, and f32); out over x, as the model runs it.
TEST_P(CudaMoeTest, FoldedAddRmsNormGivesTheBitsOfTheSeparateOps) {
  constexpr float kEps = 1e-6f;
  for (const auto& [hidden, intermediate] : {std::pair<int64_t, int64_t>{136, 72}, {30, 20}}) {
    const std::unique_ptr<ExpertWeights> w = make_weights(hidden, intermediate, 16);
    DeviceTensor norm = upload_floats(*gpu_, dtype(), {hidden}, random(hidden, 0.5f, 1.5f));
    for (int64_t rows : {3, 80, 700}) {
      const Batch b = make_batch(*w, rows, 4);
      const std::vector<float> residual = random(rows * hidden);
      DeviceBatch separate = upload(*w, b);
      DeviceTensor separate_residual = upload_floats(*gpu_, dtype(), {rows, hidden}, residual);
      gpu_->moe_experts(separate.x.tensor(), separate.ids.tensor(), separate.weights.tensor(),
                        w->gpu_gate_up->tensor(), w->gpu_down->tensor(), separate.x.tensor());
      gpu_->add_rms_norm(separate.x.tensor(), separate_residual.tensor(), norm.tensor(), kEps);
      DeviceBatch folded = upload(*w, b);
      DeviceTensor folded_residual = upload_floats(*gpu_, dtype(), {rows, hidden}, residual);
      gpu_->moe_experts_add_rms_norm(
          folded.x.tensor(), folded.ids.tensor(), folded.weights.tensor(), w->gpu_gate_up->tensor(),
          w->gpu_down->tensor(), folded.x.tensor(), folded_residual.tensor(), norm.tensor(), kEps);
      EXPECT_EQ(download_floats(*gpu_, folded.x.tensor()),
                download_floats(*gpu_, separate.x.tensor()))
          << label("norm {}", name(*w, b));
      EXPECT_EQ(download_floats(*gpu_, folded_residual.tensor()),
                download_floats(*gpu_, separate_residual.tensor()))
          << label("residual {}", name(*w, b));
    }
  }
}

// Widths that are multiples of 8 but not of the tiles' 64 (and one narrower than a tile's
// depth), every expert count and top_k up to 8, batches from 1 row to 3000: every tile shape.
TEST_P(CudaMoeTest, ExpertsMatchCpuOnOddShapes) {
  for (const auto& [hidden, intermediate] : {std::pair<int64_t, int64_t>{136, 72}, {40, 24}}) {
    for (int64_t experts : {1, 3, 8, 60, 128}) {
      const std::unique_ptr<ExpertWeights> w = make_weights(hidden, intermediate, experts);
      for (int64_t top_k : {1, 2, 3, 4, 8}) {
        if (top_k > experts) continue;
        for (int64_t rows : {1, 2, 7, 33, 257, 1000, 3000}) {
          if (hidden == 40 && rows > 257) continue;
          expect_experts_match(*w, make_batch(*w, rows, top_k), "odd");
        }
      }
    }
  }
}

// Widths that are not multiples of 8: the per-pair kernels in every dtype.
TEST_P(CudaMoeTest, ExpertsMatchCpuOnUnalignedWidths) {
  for (const auto& [hidden, intermediate] : {std::pair<int64_t, int64_t>{30, 20}, {64, 12}}) {
    const std::unique_ptr<ExpertWeights> w = make_weights(hidden, intermediate, 6);
    for (int64_t rows : {1, 33, 300}) {
      expect_experts_match(*w, make_batch(*w, rows, 3), "unaligned");
    }
  }
}

// Qwen3-30B-A3B's expert widths (hidden 2048, intermediate 768, top 8; 32 of its 128 experts,
// to keep the CPU reference short) and its TP=2 shard (intermediate 384), at batches that take
// each tile shape: 16-row tiles (1, 33 rows), 32-row ones (80) and the prefill tiles (520).
TEST_P(CudaMoeTest, ExpertsMatchCpuAtRealWidths) {
  constexpr int64_t kExperts = 32;
  constexpr int64_t kRows[] = {1, 33, 80, 520};
  if (dtype() != DType::kF32) {
    std::set<cuda::MoeTiles> taken;
    for (int64_t rows : kRows) taken.insert(cuda::moe_tiles_for(rows * 8, kExperts));
    EXPECT_EQ(taken.size(), 3u) << "the batches no longer take every tile shape";
  }
  for (int64_t intermediate : {768, 384}) {
    const std::unique_ptr<ExpertWeights> w = make_weights(2048, intermediate, kExperts);
    for (int64_t rows : kRows) {
      // The f32 path reads every pair's weights anew: kept to small batches.
      if (dtype() == DType::kF32 && rows > 33) continue;
      expect_experts_match(*w, make_batch(*w, rows, 8), "real");
    }
  }
}

// Every row's first pick is expert 0: that one expert takes every row (many tiles), and with
// top_k 1 no other expert is used at all.
TEST_P(CudaMoeTest, ExpertsWhenOneExpertTakesEveryRow) {
  for (int64_t experts : {8, 128}) {
    const std::unique_ptr<ExpertWeights> w = make_weights(136, 72, experts);
    for (int64_t top_k : {1, 4}) {
      for (int64_t rows : {7, 257, 1000}) {
        Batch b = make_batch(*w, rows, top_k);
        for (int64_t r = 0; r < rows; ++r) {
          int32_t* row = b.ids.data() + r * top_k;
          std::iota(row, row + top_k, 0);
          std::shuffle(row + 1, row + top_k, rng_);
        }
        expect_experts_match(*w, b, "all to expert 0");
      }
    }
  }
}

// Most experts get no row: two of 128 take everything, or two rows use a handful.
TEST_P(CudaMoeTest, ExpertsWhenMostExpertsAreIdle) {
  const std::unique_ptr<ExpertWeights> w = make_weights(136, 72, 128);
  Batch b = make_batch(*w, 3000, 2);
  for (int64_t r = 0; r < b.rows; ++r) {
    b.ids[r * 2] = r % 2 == 0 ? 3 : 77;
    b.ids[r * 2 + 1] = r % 2 == 0 ? 77 : 3;
  }
  expect_experts_match(*w, b, "two experts busy");
  expect_experts_match(*w, make_batch(*w, 2, 2), "two rows");
}

// Ids outside [0, experts) add nothing (the CPU reference gives them weight 0); a row with
// none inside comes out zero.
TEST_P(CudaMoeTest, ExpertsLeaveOutIdsOutsideTheExperts) {
  const std::unique_ptr<ExpertWeights> w = make_weights(136, 72, 16);
  for (int64_t rows : {5, 300, 1000}) expect_ids_outside_left_out(*w, rows);
  // No id inside at all (no tile in use): zeros, at decode and prefill sizes.
  for (int64_t rows : {3, 600}) {
    Batch b = make_batch(*w, rows, 4);
    std::fill(b.ids.begin(), b.ids.end(), -1);
    const std::vector<float> out = gpu_experts(*w, b);
    EXPECT_EQ(std::count(out.begin(), out.end(), 0.0f), static_cast<int64_t>(out.size()))
        << label("no ids inside, T {}", rows);
  }
}

// The same inputs give the same bits, run again or replayed from a graph; a replay follows
// new values in the same tensors.
TEST_P(CudaMoeTest, ExpertsAreDeterministicAndReplayInGraphs) {
  const std::unique_ptr<ExpertWeights> w = make_weights(136, 72, 8);
  for (int64_t rows : {7, 256, 1000}) {
    DeviceBatch d = upload(*w, make_batch(*w, rows, 3));
    run(*w, d);
    const std::vector<float> first = download_floats(*gpu_, d.out.tensor());
    poison(*gpu_, d.out.tensor());
    run(*w, d);
    EXPECT_EQ(download_floats(*gpu_, d.out.tensor()), first) << label("rerun T {}", rows);

    std::unique_ptr<CapturedGraph> graph = gpu_->capture([&] { run(*w, d); });
    ASSERT_NE(graph, nullptr);
    for (int round = 0; round < 2; ++round) {
      upload_into(*gpu_, d.x.tensor(), random(rows * w->hidden));
      gpu_->upload(d.ids.tensor(), random_ids(rows, w->experts, 3).data());
      replay_as_eager(*graph, *w, d, label("replay T {} round {}", rows, round));
    }
  }
}

// A row's output is the same bits alone (decode tiles) as in a batch of 600 (prefill tiles).
TEST_P(CudaMoeTest, ExpertsRowsDoNotDependOnTheBatch) {
  const std::unique_ptr<ExpertWeights> w = make_weights(136, 72, 8);
  const Batch batch = make_batch(*w, 600, 2);
  const std::vector<float> together = gpu_experts(*w, batch);
  for (int64_t r : {0, 1, 299, 599}) {
    Batch one;
    one.rows = 1;
    one.top_k = 2;
    one.x.assign(batch.x.begin() + r * w->hidden, batch.x.begin() + (r + 1) * w->hidden);
    one.ids.assign(batch.ids.begin() + r * 2, batch.ids.begin() + (r + 1) * 2);
    one.weights.assign(batch.weights.begin() + r * 2, batch.weights.begin() + (r + 1) * 2);
    const std::vector<float> alone = gpu_experts(*w, one);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + r * w->hidden))
        << label("row {}", r);
  }
}

// Prefill-sized batches over 8 to 128 experts (bf16 takes CUTLASS's sm90 grouped GEMMs there,
// f16 the mma.sync ones): widths that are and are not multiples of the GEMM tiles, small and
// chunked align (ExpertsMatchCpuAtRealWidths has Qwen3-30B-A3B's widths at 520 rows).
TEST_P(CudaMoeTest, ExpertsMatchCpuAtPrefillSizes) {
  if (dtype() == DType::kF32) GTEST_SKIP() << "f32 takes the per-pair path";
  for (const auto& [hidden, intermediate] : {std::pair<int64_t, int64_t>{136, 72}, {512, 256}}) {
    for (int64_t experts : {8, 32, 128}) {
      const std::unique_ptr<ExpertWeights> w = make_weights(hidden, intermediate, experts);
      for (int64_t rows : {512, 2048}) {
        expect_experts_match(*w, make_batch(*w, rows, 8), "prefill");
      }
    }
  }
}

// Prefill-sized skew: one expert takes every pair and the other 127 none; one expert gets
// exactly one pair (and another none) beside busy ones; ids outside the experts.
TEST_P(CudaMoeTest, ExpertsAtPrefillSizesWithSkewedRouting) {
  if (dtype() == DType::kF32) GTEST_SKIP() << "f32 takes the per-pair path";
  const std::unique_ptr<ExpertWeights> w = make_weights(136, 72, 128);
  {
    Batch b = make_batch(*w, 4096, 1);
    std::fill(b.ids.begin(), b.ids.end(), 5);
    expect_experts_match(*w, b, "every pair to expert 5");
  }
  {
    Batch b = make_batch(*w, 2048, 4);
    for (int32_t& id : b.ids) {
      if (id == 9 || id == 10) id = 11;
    }
    b.ids[777] = 9;  // expert 9: exactly one pair; expert 10: none
    expect_experts_match(*w, b, "one pair for expert 9");
  }
  expect_ids_outside_left_out(*w, 2048);
}

// At prefill sizes over many experts (the chunked align): the same bits run again and
// replayed from a graph, which follows new values in the same tensors.
TEST_P(CudaMoeTest, ExpertsAtPrefillSizesReplayInGraphs) {
  if (dtype() == DType::kF32) GTEST_SKIP() << "f32 takes the per-pair path";
  const std::unique_ptr<ExpertWeights> w = make_weights(256, 128, 64);
  const int64_t rows = 2048, top_k = 8;
  DeviceBatch d = upload(*w, make_batch(*w, rows, top_k));
  run(*w, d);
  const std::vector<float> first = download_floats(*gpu_, d.out.tensor());
  poison(*gpu_, d.out.tensor());
  run(*w, d);
  EXPECT_EQ(download_floats(*gpu_, d.out.tensor()), first) << label("rerun T {}", rows);
  std::unique_ptr<CapturedGraph> graph = gpu_->capture([&] { run(*w, d); });
  ASSERT_NE(graph, nullptr);
  for (int round = 0; round < 2; ++round) {
    Batch b = make_batch(*w, rows, top_k);
    if (round == 1) {
      for (int32_t& id : b.ids) id = id % 2 == 0 ? id : 3;  // skewed this time
    }
    upload_into(*gpu_, d.x.tensor(), b.x);
    gpu_->upload(d.ids.tensor(), b.ids.data());
    upload_into(*gpu_, d.weights.tensor(), b.weights);
    const std::vector<float> replayed =
        replay_as_eager(*graph, *w, d, label("replay T {} round {}", rows, round));
    expect_relative_error(replayed, cpu_experts(*w, b), tolerance(),
                          label("replay round {} {}", round, name(*w, b)));
  }
}

TEST_P(CudaMoeTest, ExpertsRejectBadArguments) {
  const std::unique_ptr<ExpertWeights> w = make_weights(40, 24, 4);
  DeviceBatch d = upload(*w, make_batch(*w, 3, 2));
  run(*w, d);
  // Valid operands, each case replacing one of them.
  struct Operands {
    Tensor x, ids, weights, gate_up, down, out;
  };
  const Operands valid{d.x.tensor(),          d.ids.tensor(),
                       d.weights.tensor(),    w->gpu_gate_up->tensor(),
                       w->gpu_down->tensor(), d.out.tensor()};
  const auto expect_error = [&](const std::function<void(Operands&)>& change,
                                const std::string& what) {
    Operands o = valid;
    change(o);
    EXPECT_THROW(gpu_->moe_experts(o.x, o.ids, o.weights, o.gate_up, o.down, o.out), Error) << what;
  };
  DeviceTensor wrong_dtype(*gpu_, dtype() == DType::kF32 ? DType::kBF16 : DType::kF32, {3, 40});
  expect_error([&](Operands& o) { o.x = wrong_dtype.tensor(); }, "x dtype");
  DeviceTensor ids_f32(*gpu_, DType::kF32, {3, 2});
  expect_error([&](Operands& o) { o.ids = ids_f32.tensor(); }, "ids dtype");
  DeviceTensor ids_rows(*gpu_, DType::kI32, {4, 2});
  expect_error([&](Operands& o) { o.ids = ids_rows.tensor(); }, "ids rows");
  DeviceTensor weights_k(*gpu_, DType::kF32, {3, 3});
  expect_error([&](Operands& o) { o.weights = weights_k.tensor(); }, "weights shape");
  DeviceTensor gate_up_odd(*gpu_, dtype(), {4, 47, 40});
  expect_error([&](Operands& o) { o.gate_up = gate_up_odd.tensor(); }, "gate_up odd height");
  DeviceTensor down_experts(*gpu_, dtype(), {5, 40, 24});
  expect_error([&](Operands& o) { o.down = down_experts.tensor(); }, "down experts");
  DeviceTensor wide(*gpu_, dtype(), {4, 48, 48});
  expect_error([&](Operands& o) { o.gate_up = wide.tensor().slice_last(0, 40); },
               "gate_up not contiguous");
  DeviceTensor out_rows(*gpu_, dtype(), {2, 40});
  expect_error([&](Operands& o) { o.out = out_rows.tensor(); }, "out rows");
  OwnedTensor host_out(dtype(), {3, 40});
  expect_error([&](Operands& o) { o.out = host_out.tensor; }, "out on the host");
}

// ---- moe_route ----

// The CPU's f32 probabilities of a row, as cpu::moe_route computes them.
std::vector<float> cpu_probabilities(const float* row, int64_t experts) {
  const float max = *std::max_element(row, row + experts);
  std::vector<float> probs(static_cast<size_t>(experts));
  float sum = 0.0f;
  for (int64_t e = 0; e < experts; ++e) sum += probs[e] = std::exp(row[e] - max);
  for (float& p : probs) p /= sum;
  return probs;
}

class CudaMoeRouteTest : public CudaMoeTest {
 protected:
  // Routes `logits` [rows, experts] on both backends and compares: ids exactly, except in a row
  // where two of the CPU's top_k + 1 most likely experts are within 1e-6 without being equal
  // (there the GPU's picks must be as likely as the CPU's); weights to the dtype's bound.
  void expect_route_matches(const std::vector<float>& logits, int64_t rows, int64_t experts,
                            int top_k, bool normalize, const std::string& what) {
    OwnedTensor cpu_logits = host_floats({rows, experts}, logits);
    OwnedTensor cpu_weights(DType::kF32, {rows, top_k});
    OwnedTensor cpu_ids(DType::kI32, {rows, top_k});
    cpu_->moe_route(cpu_logits.tensor, top_k, normalize, cpu_weights.tensor, cpu_ids.tensor);

    DeviceTensor gpu_logits = upload_floats(*gpu_, dtype(), {rows, experts}, logits);
    DeviceTensor gpu_weights(*gpu_, DType::kF32, {rows, top_k});
    DeviceTensor gpu_ids(*gpu_, DType::kI32, {rows, top_k});
    poison(*gpu_, gpu_weights.tensor());
    gpu_->moe_route(gpu_logits.tensor(), top_k, normalize, gpu_weights.tensor(), gpu_ids.tensor());
    std::vector<int32_t> ids(static_cast<size_t>(rows * top_k));
    gpu_->download(ids.data(), gpu_ids.tensor());
    const int32_t* expected = cpu_ids.tensor.data_as<int32_t>();
    const std::string where =
        label("moe_route {} T {} E {} k {} normalize {}", what, rows, experts, top_k, normalize);
    int mismatched_rows = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> probs = cpu_probabilities(logits.data() + r * experts, experts);
      std::vector<float> sorted = probs;
      std::sort(sorted.begin(), sorted.end(), std::greater<float>());
      bool near_tie = false;
      for (int64_t j = 0; j < std::min<int64_t>(top_k, experts - 1); ++j) {
        const float gap = sorted[j] - sorted[j + 1];
        near_tie |= gap > 0.0f && gap < 1e-6f;
      }
      const int32_t* got = ids.data() + r * top_k;
      const int32_t* want = expected + r * top_k;
      if (!near_tie) {
        mismatched_rows += !std::equal(got, got + top_k, want);
        continue;
      }
      for (int j = 0; j < top_k; ++j) {
        ASSERT_TRUE(got[j] >= 0 && got[j] < experts) << where << " row " << r;
        EXPECT_NEAR(probs[got[j]], probs[want[j]], 1e-6f) << where << " row " << r << " pick " << j;
      }
    }
    EXPECT_EQ(mismatched_rows, 0) << where;
    expect_relative_error(download_floats(*gpu_, gpu_weights.tensor()),
                          values_of(cpu_weights.tensor), tolerance(), where + " weights");
  }
};

TEST_P(CudaMoeRouteTest, RouteMatchesCpu) {
  for (int64_t experts : {1, 3, 8, 60, 128, 512}) {
    for (int top_k : {1, 2, 4, 8}) {
      if (top_k > experts) continue;
      for (int64_t rows : {1, 2, 7, 33, 257, 1000}) {
        const std::vector<float> logits = random(rows * experts, -4.0f, 4.0f);
        for (bool normalize : {false, true}) {
          expect_route_matches(logits, rows, experts, top_k, normalize, "random");
        }
      }
    }
  }
  // top_k = experts: every expert, in order of probability.
  expect_route_matches(random(33 * 60, -4.0f, 4.0f), 33, 60, 60, true, "all experts");
}

// Equal logits go to the lower id: a row of one value picks 0, 1, ...; a row of a few values
// picks each value's ids in ascending order.
TEST_P(CudaMoeRouteTest, RouteTiesPickTheLowerId) {
  const int64_t rows = 5, experts = 40;
  std::vector<float> logits(rows * experts, 0.5f);
  for (int64_t e = 0; e < experts; ++e) {
    logits[1 * experts + e] = static_cast<float>(e % 3);              // 2 at e = 2, 5, 8, ...
    logits[2 * experts + e] = e % 7 == 4 ? 1.0f : -1.0f;              // 4, 11, 18, 25, 32, 39
    logits[3 * experts + e] = static_cast<float>((experts - e) / 8);  // the low ids are largest
    logits[4 * experts + e] = e >= 36 ? 3.0f : 0.0f;
  }
  for (int top_k : {1, 3, 8, 40}) {
    for (bool normalize : {false, true}) {
      expect_route_matches(logits, rows, experts, top_k, normalize, "ties");
    }
  }
  DeviceTensor gpu_logits = upload_floats(*gpu_, dtype(), {rows, experts}, logits);
  DeviceTensor weights(*gpu_, DType::kF32, {rows, 8});
  DeviceTensor ids(*gpu_, DType::kI32, {rows, 8});
  gpu_->moe_route(gpu_logits.tensor(), 8, true, weights.tensor(), ids.tensor());
  std::vector<int32_t> got(rows * 8);
  gpu_->download(got.data(), ids.tensor());
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + 8),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(std::vector<int32_t>(got.begin() + 8, got.begin() + 16),
            (std::vector<int32_t>{2, 5, 8, 11, 14, 17, 20, 23}));
  EXPECT_EQ(std::vector<int32_t>(got.begin() + 32, got.begin() + 40),
            (std::vector<int32_t>{36, 37, 38, 39, 0, 1, 2, 3}));
}

// The router and the experts together: the same bits run again and replayed from a graph.
TEST_P(CudaMoeRouteTest, RouteAndExpertsReplayInGraphs) {
  const int64_t rows = 33, experts = 60, hidden = 136, intermediate = 72;
  const int top_k = 4;
  const std::unique_ptr<ExpertWeights> w = make_weights(hidden, intermediate, experts);
  DeviceBatch d = upload(*w, make_batch(*w, rows, top_k));
  DeviceTensor logits = upload_floats(*gpu_, dtype(), {rows, experts}, random(rows * experts));
  auto forward = [&] {
    gpu_->moe_route(logits.tensor(), top_k, true, d.weights.tensor(), d.ids.tensor());
    run(*w, d);
  };
  forward();
  std::vector<int32_t> first_ids(rows * top_k), again_ids(rows * top_k);
  gpu_->download(first_ids.data(), d.ids.tensor());
  const std::vector<float> first_weights = download_floats(*gpu_, d.weights.tensor());
  const std::vector<float> first = download_floats(*gpu_, d.out.tensor());
  forward();
  gpu_->download(again_ids.data(), d.ids.tensor());
  EXPECT_EQ(again_ids, first_ids);
  EXPECT_EQ(download_floats(*gpu_, d.weights.tensor()), first_weights);
  EXPECT_EQ(download_floats(*gpu_, d.out.tensor()), first);

  std::unique_ptr<CapturedGraph> graph = gpu_->capture(forward);
  ASSERT_NE(graph, nullptr);
  for (int round = 0; round < 2; ++round) {
    upload_into(*gpu_, logits.tensor(), random(rows * experts, -4.0f, 4.0f));
    upload_into(*gpu_, d.x.tensor(), random(rows * hidden));
    poison(*gpu_, d.out.tensor());
    graph->replay();
    const std::vector<float> replayed = download_floats(*gpu_, d.out.tensor());
    gpu_->download(first_ids.data(), d.ids.tensor());
    poison(*gpu_, d.out.tensor());
    forward();
    gpu_->download(again_ids.data(), d.ids.tensor());
    EXPECT_EQ(again_ids, first_ids) << label("replay round {}", round);
    EXPECT_EQ(replayed, download_floats(*gpu_, d.out.tensor())) << label("replay round {}", round);
  }
}

TEST_P(CudaMoeRouteTest, RouteRejectsBadArguments) {
  DeviceTensor logits = upload_floats(*gpu_, dtype(), {3, 8}, random(24));
  DeviceTensor weights(*gpu_, DType::kF32, {3, 2});
  DeviceTensor ids(*gpu_, DType::kI32, {3, 2});
  gpu_->moe_route(logits.tensor(), 2, false, weights.tensor(), ids.tensor());
  EXPECT_THROW(gpu_->moe_route(logits.tensor(), 0, false, weights.tensor(), ids.tensor()), Error);
  EXPECT_THROW(gpu_->moe_route(logits.tensor(), 9, false, weights.tensor(), ids.tensor()), Error);
  EXPECT_THROW(gpu_->moe_route(logits.tensor(), 3, false, weights.tensor(), ids.tensor()), Error);
  DeviceTensor wrong(*gpu_, dtype() == DType::kF32 ? DType::kBF16 : DType::kF32, {3, 8});
  EXPECT_THROW(gpu_->moe_route(wrong.tensor(), 2, false, weights.tensor(), ids.tensor()), Error);
  EXPECT_THROW(gpu_->moe_route(logits.tensor(), 2, false, ids.tensor(), weights.tensor()), Error);
  DeviceTensor ids_rows(*gpu_, DType::kI32, {4, 2});
  EXPECT_THROW(gpu_->moe_route(logits.tensor(), 2, false, weights.tensor(), ids_rows.tensor()),
               Error);
  OwnedTensor host_ids(DType::kI32, {3, 2});
  EXPECT_THROW(gpu_->moe_route(logits.tensor(), 2, false, weights.tensor(), host_ids.tensor),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaMoeTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_label(info.param)); });
INSTANTIATE_TEST_SUITE_P(Dtypes, CudaMoeRouteTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_label(info.param)); });

}  // namespace
}  // namespace nanovllm::test
