#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "kernels/backend.h"

namespace nanovllm {
namespace {

using test::int_tensor;
using test::random_tensor;

TEST(StoreKv, WritesKeysAndValuesToTheirSlotsAndSkipsMinusOne) {
  std::mt19937 rng(50);
  auto backend = make_cpu_backend(2);
  const AttentionDims dims{4, 2, 8};
  const int num_blocks = 3, block_size = 4;
  OwnedTensor qkv = random_tensor({5, dims.qkv_size()}, rng);
  OwnedTensor k(DType::kF32, {num_blocks, block_size, 2, 8});
  OwnedTensor v(DType::kF32, {num_blocks, block_size, 2, 8});
  std::fill_n(k.tensor.data_as<float>(), k.tensor.numel(), -7.0f);
  std::fill_n(v.tensor.data_as<float>(), v.tensor.numel(), -9.0f);
  const std::vector<int32_t> slot_values = {9, -1, 0, 11, -1};
  OwnedTensor slots = int_tensor(slot_values);
  AttentionMetadata metadata;
  metadata.slot_mapping = slots.tensor;
  backend->store_kv(qkv.tensor, {k.tensor, v.tensor}, metadata, dims);

  const int width = dims.kv_size();
  std::vector<int> written_by(num_blocks * block_size, -1);
  for (int t = 0; t < 5; ++t) {
    if (slot_values[t] >= 0) written_by[slot_values[t]] = t;
  }
  for (int slot = 0; slot < num_blocks * block_size; ++slot) {
    for (int i = 0; i < width; ++i) {
      const float got_k = k.tensor.data_as<float>()[slot * width + i];
      const float got_v = v.tensor.data_as<float>()[slot * width + i];
      const int t = written_by[slot];
      if (t < 0) {
        ASSERT_EQ(got_k, -7.0f) << "slot " << slot;
        ASSERT_EQ(got_v, -9.0f) << "slot " << slot;
      } else {
        const float* row = qkv.tensor.data_as<float>() + t * dims.qkv_size();
        ASSERT_EQ(got_k, row[dims.q_size() + i]) << "slot " << slot;
        ASSERT_EQ(got_v, row[dims.q_size() + width + i]) << "slot " << slot;
      }
    }
  }
}

TEST(StoreKv, RejectsSlotsOutsideTheCacheAndMismatchedShapes) {
  std::mt19937 rng(51);
  auto backend = make_cpu_backend(1);
  const AttentionDims dims{2, 1, 4};
  OwnedTensor qkv = random_tensor({2, dims.qkv_size()}, rng);
  OwnedTensor k(DType::kF32, {2, 3, 1, 4});
  OwnedTensor v(DType::kF32, {2, 3, 1, 4});
  OwnedTensor v_bad(DType::kF32, {2, 3, 1, 5});
  for (const std::vector<int32_t>& bad : {std::vector<int32_t>{0, 6}, {-2, 0}, {0}}) {
    OwnedTensor slots = int_tensor(bad);
    AttentionMetadata metadata;
    metadata.slot_mapping = slots.tensor;
    EXPECT_THROW(backend->store_kv(qkv.tensor, {k.tensor, v.tensor}, metadata, dims), Error);
  }
  OwnedTensor slots = int_tensor({0, 5});
  AttentionMetadata metadata;
  metadata.slot_mapping = slots.tensor;
  EXPECT_NO_THROW(backend->store_kv(qkv.tensor, {k.tensor, v.tensor}, metadata, dims));
  EXPECT_THROW(backend->store_kv(qkv.tensor, {k.tensor, v_bad.tensor}, metadata, dims), Error);
}

}  // namespace
}  // namespace nanovllm
