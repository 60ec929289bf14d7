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
