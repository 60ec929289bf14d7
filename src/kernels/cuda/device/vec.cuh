// Device helpers shared by the CUDA kernels: conversions between the storage dtypes and float,
// 16-byte vector loads and stores, and the host-side dispatch from DType to a device type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "core/check.h"
#include "core/dtype.h"

namespace nanovllm::cuda {

__device__ __forceinline__ float to_float(float value) {
  return value;
}
__device__ __forceinline__ float to_float(__nv_bfloat16 value) {
  return __bfloat162float(value);
}
__device__ __forceinline__ float to_float(__half value) {
  return __half2float(value);
}

// Round to nearest even, as torch does.
template <typename T>
__device__ __forceinline__ T from_float(float value);
template <>
__device__ __forceinline__ float from_float<float>(float value) {
  return value;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float value) {
  return __float2half_rn(value);
}

// `value` rounded to T and widened back: what storing it in a T tensor would keep.
template <typename T>
__device__ __forceinline__ float round_to(float value) {
  return to_float(from_float<T>(value));
}

// Starts bringing the 128-byte line holding `address` into L1 (a hint: no value, no fault).
__device__ __forceinline__ void prefetch_l1(const void* address) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(address));
}

// Elements of T in one 16-byte access: 4 floats or 8 bf16/f16.
template <typename T>
inline constexpr int kVecWidth = 16 / static_cast<int>(sizeof(T));

// Loads kWidth consecutive elements as floats: one 16-byte load when kWidth is kVecWidth<T>
// (src 16-byte aligned), element by element when kWidth is 1.
template <typename T, int kWidth>
__device__ __forceinline__ void load_floats(const T* src, float (&dst)[kWidth]) {
  static_assert(kWidth == 1 || kWidth == kVecWidth<T>, "kWidth is 1 or one 16-byte vector");
  if constexpr (kWidth == 1) {
    dst[0] = to_float(src[0]);
  } else {
    alignas(16) T elements[kWidth];
    *reinterpret_cast<uint4*>(elements) = *reinterpret_cast<const uint4*>(src);
#pragma unroll
    for (int i = 0; i < kWidth; ++i) dst[i] = to_float(elements[i]);
  }
}

// Stores kWidth floats rounded to T, as load_floats reads them.
template <typename T, int kWidth>
__device__ __forceinline__ void store_floats(T* dst, const float (&src)[kWidth]) {
  static_assert(kWidth == 1 || kWidth == kVecWidth<T>, "kWidth is 1 or one 16-byte vector");
  if constexpr (kWidth == 1) {
    dst[0] = from_float<T>(src[0]);
  } else {
    alignas(16) T elements[kWidth];
#pragma unroll
    for (int i = 0; i < kWidth; ++i) elements[i] = from_float<T>(src[i]);
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(elements);
  }
}

// Copies kWidth elements unchanged (one 16-byte access when kWidth is kVecWidth<T>).
template <typename T, int kWidth>
__device__ __forceinline__ void copy_elements(const T* src, T* dst) {
  static_assert(kWidth == 1 || kWidth == kVecWidth<T>, "kWidth is 1 or one 16-byte vector");
  if constexpr (kWidth == 1) {
    dst[0] = src[0];
  } else {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  }
}

// Writes kWidth zeros.
template <typename T, int kWidth>
__device__ __forceinline__ void zero_elements(T* dst) {
  static_assert(kWidth == 1 || kWidth == kVecWidth<T>, "kWidth is 1 or one 16-byte vector");
  if constexpr (kWidth == 1) {
    dst[0] = from_float<T>(0.0f);
  } else {
    *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  }
}

// The 8 bf16/f16 elements of a 16-byte vector as floats, and back (rounded to nearest even),
// in registers only: where local memory is slow (a kernel whose shared memory leaves L1
// little room), a reinterpreted array would not be.
__device__ __forceinline__ void unpack_pair(uint32_t word, __nv_bfloat16, float& lo, float& hi) {
  lo = __uint_as_float(word << 16);
  hi = __uint_as_float(word & 0xffff0000u);
}
__device__ __forceinline__ void unpack_pair(uint32_t word, __half, float& lo, float& hi) {
  lo = __half2float(__ushort_as_half(static_cast<unsigned short>(word & 0xffffu)));
  hi = __half2float(__ushort_as_half(static_cast<unsigned short>(word >> 16)));
}
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi, __nv_bfloat16) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
}
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi, __half) {
  return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(lo))) |
         (static_cast<uint32_t>(__half_as_ushort(__float2half_rn(hi))) << 16);
}
template <typename T>
__device__ __forceinline__ void unpack8(const uint4& vector, float (&values)[8]) {
  unpack_pair(vector.x, T{}, values[0], values[1]);
  unpack_pair(vector.y, T{}, values[2], values[3]);
  unpack_pair(vector.z, T{}, values[4], values[5]);
  unpack_pair(vector.w, T{}, values[6], values[7]);
}
template <typename T>
__device__ __forceinline__ uint4 pack8(const float (&values)[8]) {
  return make_uint4(pack_pair(values[0], values[1], T{}), pack_pair(values[2], values[3], T{}),
                    pack_pair(values[4], values[5], T{}), pack_pair(values[6], values[7], T{}));
}

// Dot product of 8 floats as a tree (a short dependency chain).
__device__ __forceinline__ float dot8(const float (&a)[8], const float (&b)[8]) {
  const float p0 = fmaf(a[1], b[1], a[0] * b[0]);
  const float p1 = fmaf(a[3], b[3], a[2] * b[2]);
  const float p2 = fmaf(a[5], b[5], a[4] * b[4]);
  const float p3 = fmaf(a[7], b[7], a[6] * b[6]);
  return (p0 + p1) + (p2 + p3);
}

// Host side: whether every pointer is 16-byte aligned and every count (row lengths, row strides,
// column offsets, in elements) is a multiple of kVecWidth<T>, so a kernel can use 16-byte
// accesses throughout.
template <typename T>
inline bool vectorizable(std::initializer_list<const void*> pointers,
                         std::initializer_list<int64_t> counts) {
  for (const void* pointer : pointers) {
    if (reinterpret_cast<uintptr_t>(pointer) % 16 != 0) return false;
  }
  for (int64_t count : counts) {
    if (count % kVecWidth<T> != 0) return false;
  }
  return true;
}

// Host side: calls body(T{}) with T the device type of `dtype` (float, __nv_bfloat16, __half);
// other dtypes throw Error naming `op`.
template <typename Body>
void dispatch_float_dtype(DType dtype, const char* op, Body&& body) {
  switch (dtype) {
    case DType::kF32:
      body(float{});
      return;
    case DType::kBF16:
      body(__nv_bfloat16{});
      return;
    case DType::kF16:
      body(__half{});
      return;
    default:
      throw Error(fmt::format("{}: dtype {} is not supported on CUDA (float32, bfloat16, float16)",
                              op, dtype_name(dtype)));
  }
}

// Host side: threads for a block that walks a row of `items` with one thread per item where
// possible: a whole number of warps, at least one, at most 1024.
inline int threads_for(int64_t items) {
  const int64_t warps = (items + 31) / 32;
  return static_cast<int>(warps < 1 ? 32 : warps > 32 ? 1024 : warps * 32);
}

}  // namespace nanovllm::cuda
