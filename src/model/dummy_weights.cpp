#include "model/dummy_weights.h"

#include <algorithm>
#include <cmath>

#include "model/parallel_for.h"
#include "model/weight_conversion.h"

namespace nanovllm {
namespace {

constexpr uint64_t kSeed = 0x6e616e6f766c6c6dULL;
constexpr float kStd = 0.02f;

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (char c : text) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// splitmix64's output function: a good 64-bit mix of a counter.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline float value_at(uint64_t stream, int64_t index) {
  const uint64_t bits = mix(stream + static_cast<uint64_t>(index + 1) * 0x9e3779b97f4a7c15ULL);
  // Sum of four uniform(0, 1) variables (Irwin-Hall): mean 2, variance 1/3, close to normal.
  float sum = 0.0f;
  for (int part = 0; part < 4; ++part) {
    sum += (static_cast<float>((bits >> (16 * part)) & 0xffffu) + 0.5f) * (1.0f / 65536.0f);
  }
  constexpr float kUnitScale = 1.7320508f;  // sqrt(3): unit variance
  return (sum - 2.0f) * kUnitScale * kStd;
}

constexpr int64_t kBlock = 4096;

}  // namespace

float dummy_weight_value(std::string_view name, int64_t index) {
  return value_at(fnv1a(name) ^ kSeed, index);
}

void fill_dummy_weights(const std::vector<WeightSlot>& slots, Backend& backend) {
  const DType dtype = backend.compute_dtype();
  const size_t element_size = dtype_size(dtype);
  StagedUploader uploader(backend);
  for (const WeightSlot& slot : slots) {
    const uint64_t stream = fnv1a(slot.name) ^ kSeed;
    uploader.upload(slot.destination, [&](void* host, int64_t first, int64_t count) {
      parallel_for(count, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
        float values[kBlock];
        for (int64_t block = begin; block < end; block += kBlock) {
          const int64_t n = std::min(kBlock, end - block);
          for (int64_t i = 0; i < n; ++i) {
            // The value of the checkpoint element, whatever shard of it this is.
            values[i] =
                slot.is_norm_gain ? 1.0f : value_at(stream, slot.source_index(first + block + i));
          }
          convert_elements(values, DType::kF32,
                           static_cast<std::byte*>(host) + block * element_size, dtype, n);
        }
      });
    });
  }
}

}  // namespace nanovllm
