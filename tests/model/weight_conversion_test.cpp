#include "model/weight_conversion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "fake_backend.h"

namespace nanovllm {
namespace {

using testing::FakeBackend;

std::vector<std::byte> bytes_of(const std::vector<float>& values, DType dtype) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t bits =
          dtype == DType::kBF16 ? float_to_bf16(values[i]) : float_to_fp16(values[i]);
      std::memcpy(bytes.data() + 2 * i, &bits, 2);
    }
  }
  return bytes;
}

float element(const std::byte* bytes, DType dtype, size_t i) {
  if (dtype == DType::kF32) {
    float value;
    std::memcpy(&value, bytes + 4 * i, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes + 2 * i, 2);
  return dtype == DType::kBF16 ? bf16_to_float(bits) : fp16_to_float(bits);
}

// Values that probe rounding, ranges and specials.
std::vector<float> probe_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {0.0f,  -0.0f,   1.0f,    -1.0f,    0.1f,        1.00390625f,
                               65504, 65519.f, 65520.f, 1e-5f,    6.0e-8f,     3e38f,
                               inf,   -inf,    1e-40f,  -2.5e-3f, 1.01171875f, 257.0f};
  std::mt19937 generator(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int i = 0; i < 500; ++i) values.push_back(normal(generator));
  return values;
}

const DType kFloating[] = {DType::kF32, DType::kF16, DType::kBF16};

// Every pair of dtypes against an element-by-element conversion through float.
TEST(ConvertElements, MatchesElementwiseConversionForEveryPair) {
  const std::vector<float> values = probe_values();
  for (DType from : kFloating) {
    const std::vector<std::byte> source = bytes_of(values, from);
    for (DType to : kFloating) {
      std::vector<std::byte> converted(values.size() * dtype_size(to));
      convert_elements(source.data(), from, converted.data(), to, values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        const float original = element(source.data(), from, i);
        const float expected = element(bytes_of({original}, to).data(), to, 0);
        const float actual = element(converted.data(), to, i);
        if (std::isnan(expected)) {
          EXPECT_TRUE(std::isnan(actual));
        } else {
          ASSERT_EQ(std::signbit(actual), std::signbit(expected));
          ASSERT_EQ(actual, expected)
              << dtype_name(from) << " -> " << dtype_name(to) << " of " << original;
        }
      }
    }
  }
}

// Bit patterns worked out by hand, independent of the helpers above.
TEST(ConvertElements, RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 1.0 (0x3f80) and 1 + 2^-7 (0x3f81): ties go to even.
  // 1 + 3 * 2^-8 is halfway between 0x3f81 and 0x3f82: to 0x3f82.
  const float input[] = {1.00390625f, 1.01171875f, -2.0f, 65504.0f};
  uint16_t bf16[4];
  convert_elements(input, DType::kF32, bf16, DType::kBF16, 4);
  EXPECT_EQ(bf16[0], 0x3f80);
  EXPECT_EQ(bf16[1], 0x3f82);
  EXPECT_EQ(bf16[2], 0xc000);
  uint16_t fp16[4];
  convert_elements(input, DType::kF32, fp16, DType::kF16, 4);
  EXPECT_EQ(fp16[0], 0x3c04);  // exact in fp16
  EXPECT_EQ(fp16[2], 0xc000);
  EXPECT_EQ(fp16[3], 0x7bff);  // largest finite fp16
  float back[4];
  convert_elements(bf16, DType::kBF16, back, DType::kF32, 4);
  EXPECT_EQ(back[1], 1.015625f);
}

TEST(ConvertElements, ReadsUnalignedSources) {
  const std::vector<float> values = {1.5f, -3.25f, 7.0f};
  std::vector<std::byte> padded(1 + values.size() * 4);
  std::memcpy(padded.data() + 1, values.data(), values.size() * 4);
  float out[3];
  convert_elements(padded.data() + 1, DType::kF32, out, DType::kF32, 3);
  EXPECT_EQ(std::vector<float>(out, out + 3), values);
  uint16_t half[3];
  convert_elements(padded.data() + 1, DType::kF32, half, DType::kBF16, 3);
  EXPECT_EQ(bf16_to_float(half[1]), -3.25f);
}

TEST(ConvertElements, CountsValuesThatOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  const float input[] = {70000.0f, 1.0f, -1e10f, inf, 65504.0f};
  uint16_t out[5];
  EXPECT_EQ(convert_elements(input, DType::kF32, out, DType::kF16, 5), 2);  // inf stays inf
  EXPECT_EQ(convert_elements(input, DType::kF32, out, DType::kBF16, 5), 0);
  const float huge[] = {3.4e38f};
  EXPECT_EQ(convert_elements(huge, DType::kF32, out, DType::kBF16, 1), 1);
}

TEST(ConvertElements, ParallelEqualsSerial) {
  const int64_t count = (int64_t{1} << 20) + 77;
  std::vector<float> values(count);
  std::mt19937 generator(9);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (float& value : values) value = normal(generator);
  std::vector<uint16_t> serial(count), parallel(count);
  EXPECT_EQ(
      convert_elements(values.data(), DType::kF32, serial.data(), DType::kF16, count),
      convert_elements_parallel(values.data(), DType::kF32, parallel.data(), DType::kF16, count));
  EXPECT_EQ(serial, parallel);
}

TEST(StagedUploader, FillsTensorsThroughSmallChunks) {
  FakeBackend backend(DType::kF32);
  OwnedTensor first(DType::kF32, {5, 7});
  OwnedTensor second(DType::kF32, {3});
  StagedUploader uploader(backend, 12);  // three floats per chunk
  std::vector<std::pair<int64_t, int64_t>> calls;
  auto produce = [&](void* host, int64_t begin, int64_t count) {
    calls.emplace_back(begin, count);
    for (int64_t i = 0; i < count; ++i) static_cast<float*>(host)[i] = float(begin + i);
  };
  uploader.upload(first.tensor, produce);
  EXPECT_EQ(backend.uploads, 12);  // ceil(35 / 3)
  EXPECT_EQ(calls.back(), (std::pair<int64_t, int64_t>{33, 2}));
  const std::vector<float> values = backend.read<float>(first.tensor);
  for (int i = 0; i < 35; ++i) EXPECT_EQ(values[i], float(i));
  uploader.upload(second.tensor, produce);
  EXPECT_EQ(backend.read<float>(second.tensor), (std::vector<float>{0, 1, 2}));
}

TEST(StagedUploader, RowsOfAMergedTensor) {
  FakeBackend backend(DType::kBF16);
  OwnedTensor merged(DType::kBF16, {4, 2});
  StagedUploader uploader(backend);
  uploader.upload(merged.tensor.slice_rows(2, 4), [](void* host, int64_t, int64_t count) {
    for (int64_t i = 0; i < count; ++i) static_cast<uint16_t*>(host)[i] = 0x3f80;  // 1.0
  });
  const std::vector<uint16_t> bits = backend.read<uint16_t>(merged.tensor);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(bits[i], 0x3f80);
}

}  // namespace
}  // namespace nanovllm
