#include "model/rotary.h"

#include <cmath>

#include "core/check.h"

namespace nanovllm {

std::vector<float> rotary_cos_sin_table(int max_positions, int head_dim, double theta) {
  NVLLM_CHECK_GT(max_positions, 0);
  NVLLM_CHECK_MSG(head_dim > 0 && head_dim % 2 == 0, "head_dim {} must be positive and even",
                  head_dim);
  const int half = head_dim / 2;
  // HF: inv_freq = 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all float32; the float32
  // pow is evaluated in double and rounded once.
  const float base = static_cast<float>(theta);
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(base), exponent));
    inv_freq[i] = 1.0f / power;
  }
  // HF: freqs = position (float32) * inv_freq (float32), rounded to float32; cos/sin of that.
  std::vector<float> table(static_cast<size_t>(max_positions) * head_dim);
  for (int p = 0; p < max_positions; ++p) {
    float* row = table.data() + static_cast<size_t>(p) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      row[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      row[half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
  return table;
}

}  // namespace nanovllm
