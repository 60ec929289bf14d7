// embedding, gather_rows, silu_mul and the host copies.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"
#include "kernels/backend.h"

namespace nanovllm {
namespace {

using test::expect_close;
using test::int_tensor;
using test::random_tensor;

TEST(Embedding, CopiesTheRowsOfTheIds) {
  std::mt19937 rng(20);
  auto backend = make_cpu_backend(2);
  OwnedTensor table = random_tensor({11, 7}, rng);
  for (const std::vector<int32_t>& ids :
       {std::vector<int32_t>{3}, std::vector<int32_t>{0, 10, 10, 5, 1},
        std::vector<int32_t>(40, 9)}) {
    OwnedTensor id_tensor = int_tensor(ids);
    OwnedTensor out(DType::kF32, {static_cast<int64_t>(ids.size()), 7});
    backend->embedding(id_tensor.tensor, table.tensor, 0, out.tensor);
    for (size_t t = 0; t < ids.size(); ++t) {
      for (int i = 0; i < 7; ++i) {
        ASSERT_EQ(out.tensor.data_as<float>()[t * 7 + i],
                  table.tensor.data_as<float>()[ids[t] * 7 + i]);
      }
    }
  }
}

// One rank's shard of a vocabulary-parallel table (ids 11 to 21 here): the ids of other shards
// get zero rows, and the rows of all shards summed give the whole table's lookup.
TEST(Embedding, AShardGivesItsRowsAndZerosForTheOtherIds) {
  std::mt19937 rng(21);
  auto backend = make_cpu_backend(1);
  OwnedTensor table = random_tensor({22, 7}, rng);
  const std::vector<int32_t> ids = {0, 11, 21, 10, 1 << 30};
  OwnedTensor id_tensor = int_tensor(ids);
  OwnedTensor whole(DType::kF32, {5, 7}), first(DType::kF32, {5, 7}), second(DType::kF32, {5, 7});
  backend->embedding(id_tensor.tensor, table.tensor, 0, whole.tensor);
  backend->embedding(id_tensor.tensor, table.tensor.slice_rows(0, 11), 0, first.tensor);
  backend->embedding(id_tensor.tensor, table.tensor.slice_rows(11, 22), 11, second.tensor);
  for (int t = 0; t < 5; ++t) {
    for (int i = 0; i < 7; ++i) {
      const float a = first.tensor.data_as<float>()[t * 7 + i];
      const float b = second.tensor.data_as<float>()[t * 7 + i];
      EXPECT_TRUE(a == 0.0f || b == 0.0f);
      EXPECT_EQ(a + b, whole.tensor.data_as<float>()[t * 7 + i]);
    }
  }
  EXPECT_EQ(whole.tensor.data_as<float>()[4 * 7], 0.0f);  // past the table: a zero row
}

TEST(Embedding, NegativeOrNonIntegerIdsAreAnError) {
  std::mt19937 rng(21);
  auto backend = make_cpu_backend(1);
  OwnedTensor table = random_tensor({11, 7}, rng);
  OwnedTensor out(DType::kF32, {2, 7});
  OwnedTensor ids = int_tensor({2, -1});
  try {
    backend->embedding(ids.tensor, table.tensor, 0, out.tensor);
    ADD_FAILURE() << "id -1 was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("-1"), std::string::npos) << error.what();
  }
  OwnedTensor float_ids(DType::kF32, {2});
  EXPECT_THROW(backend->embedding(float_ids.tensor, table.tensor, 0, out.tensor), Error);
}

TEST(GatherRows, PicksIndexedRowsAndRejectsBadIndices) {
  std::mt19937 rng(22);
  auto backend = make_cpu_backend(2);
  OwnedTensor x = random_tensor({9, 5}, rng);
  OwnedTensor indices = int_tensor({8, 0, 3, 3});
  OwnedTensor out(DType::kF32, {4, 5});
  backend->gather_rows(x.tensor, indices.tensor, out.tensor);
  const int32_t expected_rows[] = {8, 0, 3, 3};
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(out.tensor.data_as<float>()[r * 5 + i],
                x.tensor.data_as<float>()[expected_rows[r] * 5 + i]);
    }
  }
  OwnedTensor bad = int_tensor({8, 9, 0, 0});
  EXPECT_THROW(backend->gather_rows(x.tensor, bad.tensor, out.tensor), Error);
}

TEST(SiluMul, MatchesReference) {
  std::mt19937 rng(23);
  auto backend = make_cpu_backend(2);
  for (int64_t rows : {1, 3, 17}) {
    for (int64_t width : {1, 5, 257}) {
      OwnedTensor gate_up = random_tensor({rows, 2 * width}, rng, -8.0f, 8.0f);
      OwnedTensor out(DType::kF32, {rows, width});
      backend->silu_mul(gate_up.tensor, out.tensor);
      std::vector<double> expected(rows * width);
      const float* gu = gate_up.tensor.data_as<float>();
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < width; ++i) {
          const double g = gu[r * 2 * width + i];
          const double u = gu[r * 2 * width + width + i];
          expected[r * width + i] = g / (1.0 + std::exp(-g)) * u;
        }
      }
      expect_close(out.tensor, expected, 1e-5, 1e-6, "silu_mul");
    }
  }
  OwnedTensor odd(DType::kF32, {2, 5});
  OwnedTensor out(DType::kF32, {2, 2});
  EXPECT_THROW(backend->silu_mul(odd.tensor, out.tensor), Error);
}

TEST(HostCopies, UploadAndDownloadRoundTrip) {
  auto backend = make_cpu_backend(1);
  EXPECT_EQ(backend->device(), Device::kCPU);
  EXPECT_EQ(backend->compute_dtype(), DType::kF32);
  std::vector<float> host = {1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.5f};
  OwnedTensor device(DType::kF32, {2, 3});
  backend->upload(device.tensor, host.data());
  std::vector<float> back(6);
  backend->download(back.data(), device.tensor);
  backend->synchronize();
  EXPECT_EQ(back, host);
  EXPECT_THROW(backend->download(back.data(), device.tensor.slice_last(0, 2)), Error);
}

}  // namespace
}  // namespace nanovllm
