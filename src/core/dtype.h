// Element types and the host-side bf16/fp16 <-> fp32 conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace nanovllm {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);

inline float bf16_to_float(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float fp16_to_float(uint16_t bits);
uint16_t float_to_fp16(float value);

}  // namespace nanovllm
