#include "core/tensor.h"

#include <gtest/gtest.h>

#include "core/buffer.h"

namespace nanovllm {
namespace {

TEST(Tensor, ContiguousShapeAndStrides) {
  OwnedTensor owned(DType::kF32, {2, 3, 4});
  const Tensor& t = owned.tensor;
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_EQ(t.stride(-1), 1);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.shape_string(), "float32 [2, 3, 4]");
}

TEST(Tensor, SlicesViewTheSameStorage) {
  OwnedTensor owned(DType::kF32, {4, 6});
  float* base = owned.tensor.data_as<float>();
  for (int i = 0; i < 24; ++i) base[i] = static_cast<float>(i);
  Tensor rows = owned.tensor.slice_rows(1, 3);
  EXPECT_EQ(rows.size(0), 2);
  EXPECT_EQ(rows.data_as<float>()[0], 6.0f);
  Tensor cols = owned.tensor.slice_last(2, 5);
  EXPECT_EQ(cols.size(1), 3);
  EXPECT_EQ(cols.stride(0), 6);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.data_as<float>()[cols.stride(0)], 8.0f);
}

TEST(Tensor, BadViewsThrow) {
  OwnedTensor owned(DType::kF32, {4, 6});
  EXPECT_THROW(owned.tensor.view({5, 5}), Error);
  EXPECT_THROW(owned.tensor.slice_rows(3, 5), Error);
  EXPECT_THROW(owned.tensor.slice_last(2, 5).view({24}), Error);
  EXPECT_THROW(owned.tensor.size(2), Error);
}

}  // namespace
}  // namespace nanovllm
