// Reductions written so the auto-vectorizer can use them without -ffast-math: each keeps
// kLanes independent partial sums (a whole number of vector registers) and adds them at the end.
#pragma once

#include <cstdint>

namespace nanovllm::cpu {

inline constexpr int kLanes = 32;

inline float dot(const float* a, const float* b, int64_t n) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[i + l] * b[i + l];
  }
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

inline float sum_of_squares(const float* a, int64_t n) {
  return dot(a, a, n);
}

}  // namespace nanovllm::cpu
