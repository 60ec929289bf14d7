#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace nanovllm {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_EQ(dtype_name(DType::kBF16), "bfloat16");
}

TEST(DType, Bf16RoundTripsExactValuesAndRoundsToNearestEven) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.5f)), 1.5f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-3.0f)), -3.0f);
  // 1 + 2^-8 lies halfway between two bf16 values; ties go to the even mantissa (1.0).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, Fp16MatchesIeeeHalfOnKnownValues) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(1e6f), 0x7c00);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_float(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isinf(fp16_to_float(0xfc00)));
}

TEST(DType, Fp16RoundTripIsWithinHalfAnUlp) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  for (int i = 0; i < 10000; ++i) {
    const float value = dist(rng);
    const float back = fp16_to_float(float_to_fp16(value));
    const float ulp = std::ldexp(1.0f, std::ilogb(value) - 10);
    EXPECT_LE(std::fabs(back - value), ulp / 2) << value;
  }
}

}  // namespace
}  // namespace nanovllm
