#include "model/weight_conversion.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "model/parallel_for.h"

namespace nanovllm {
namespace {

// Elements are read and written with memcpy: safetensors data need not be aligned.
template <DType kFrom>
inline float load_as_float(const std::byte* src, int64_t i) {
  if constexpr (kFrom == DType::kF32) {
    float value;
    std::memcpy(&value, src + i * 4, 4);
    return value;
  } else {
    uint16_t bits;
    std::memcpy(&bits, src + i * 2, 2);
    if constexpr (kFrom == DType::kBF16) return bf16_to_float(bits);
    return fp16_to_float(bits);
  }
}

template <DType kTo>
inline float store_from_float(std::byte* dst, int64_t i, float value) {
  if constexpr (kTo == DType::kF32) {
    std::memcpy(dst + i * 4, &value, 4);
    return value;
  } else {
    const uint16_t bits = kTo == DType::kBF16 ? float_to_bf16(value) : float_to_fp16(value);
    std::memcpy(dst + i * 2, &bits, 2);
    return kTo == DType::kBF16 ? bf16_to_float(bits) : fp16_to_float(bits);
  }
}

template <DType kFrom, DType kTo>
int64_t convert_loop(const std::byte* src, std::byte* dst, int64_t count) {
  int64_t overflows = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float value = load_as_float<kFrom>(src, i);
    const float stored = store_from_float<kTo>(dst, i, value);
    if constexpr (kTo != DType::kF32) overflows += std::isinf(stored) && !std::isinf(value);
  }
  return overflows;
}

template <DType kFrom>
int64_t convert_from(const std::byte* src, std::byte* dst, DType to, int64_t count) {
  switch (to) {
    case DType::kF32:
      return convert_loop<kFrom, DType::kF32>(src, dst, count);
    case DType::kF16:
      return convert_loop<kFrom, DType::kF16>(src, dst, count);
    case DType::kBF16:
      return convert_loop<kFrom, DType::kBF16>(src, dst, count);
    default:
      break;
  }
  NVLLM_CHECK_MSG(false, "cannot convert to {}", dtype_name(to));
  return 0;
}

// Enough elements per thread that starting threads is noise.
constexpr int64_t kConversionGrain = int64_t{1} << 18;

}  // namespace

bool is_floating(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF32;
}

int64_t convert_elements(const void* src, DType from, void* dst, DType to, int64_t count) {
  NVLLM_CHECK_MSG(is_floating(from) && is_floating(to), "cannot convert {} to {}", dtype_name(from),
                  dtype_name(to));
  NVLLM_CHECK_GE(count, 0);
  const auto* in = static_cast<const std::byte*>(src);
  auto* out = static_cast<std::byte*>(dst);
  if (from == to) {
    std::memcpy(out, in, static_cast<size_t>(count) * dtype_size(from));
    return 0;
  }
  switch (from) {
    case DType::kF32:
      return convert_from<DType::kF32>(in, out, to, count);
    case DType::kF16:
      return convert_from<DType::kF16>(in, out, to, count);
    default:
      return convert_from<DType::kBF16>(in, out, to, count);
  }
}

int64_t convert_elements_parallel(const void* src, DType from, void* dst, DType to, int64_t count) {
  std::atomic<int64_t> overflows{0};
  const size_t in_size = dtype_size(from);
  const size_t out_size = dtype_size(to);
  parallel_for(count, kConversionGrain, [&](int64_t begin, int64_t end) {
    overflows += convert_elements(static_cast<const std::byte*>(src) + begin * in_size, from,
                                  static_cast<std::byte*>(dst) + begin * out_size, to, end - begin);
  });
  return overflows.load();
}

StagedUploader::StagedUploader(Backend& backend, size_t staging_bytes)
    : backend_(backend), staging_limit_(staging_bytes) {}

void StagedUploader::upload(const Tensor& dst, const Producer& produce) {
  NVLLM_CHECK_MSG(dst.is_contiguous(), "upload into a non-contiguous tensor {}",
                  dst.shape_string());
  const size_t element_size = dtype_size(dst.dtype());
  const int64_t total = dst.numel();
  const int64_t chunk_elements =
      std::max<int64_t>(1, static_cast<int64_t>(staging_limit_ / element_size));
  const size_t needed = static_cast<size_t>(std::min(total, chunk_elements)) * element_size;
  if (needed > staging_size_) {
    staging_ = std::make_unique_for_overwrite<std::byte[]>(needed);
    staging_size_ = needed;
  }
  for (int64_t first = 0; first < total; first += chunk_elements) {
    const int64_t count = std::min(chunk_elements, total - first);
    produce(staging_.get(), first, count);
    Tensor chunk(static_cast<std::byte*>(dst.data()) + first * element_size, dst.dtype(), {count},
                 dst.device());
    backend_.upload(chunk, staging_.get());
    // The staging buffer is rewritten next; make sure the copy has consumed it.
    backend_.synchronize();
  }
}

}  // namespace nanovllm
