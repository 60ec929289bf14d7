#include "model/rotary.h"

#include <cmath>

#include "core/check.h"

namespace nanovllm {
namespace {

// transformers' _compute_llama3_parameters, step by step in float32 (its Python scalars are
// doubles, each rounded to float32 where it meets a float32 tensor): low frequencies (long
// wavelengths) are divided by `factor`, high ones kept, the band between blended smoothly.
void scale_like_llama3(std::vector<float>& inv_freq, const RopeScaling& scaling) {
  const double old_context = scaling.original_max_position_embeddings;
  const auto low_freq_wavelen = static_cast<float>(old_context / scaling.low_freq_factor);
  const auto high_freq_wavelen = static_cast<float>(old_context / scaling.high_freq_factor);
  const auto factor = static_cast<float>(scaling.factor);
  const auto two_pi = static_cast<float>(2.0 * M_PI);
  const auto low = static_cast<float>(scaling.low_freq_factor);
  const auto band = static_cast<float>(scaling.high_freq_factor - scaling.low_freq_factor);
  for (float& frequency : inv_freq) {
    const float wavelen = two_pi / frequency;
    const float llama = wavelen > low_freq_wavelen ? frequency / factor : frequency;
    const float smooth = (static_cast<float>(old_context) / wavelen - low) / band;
    const float smoothed = (1.0f - smooth) * llama / factor + smooth * llama;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    frequency = medium ? smoothed : llama;
  }
}

}  // namespace

std::vector<float> rotary_cos_sin_table(int max_positions, int head_dim, double theta,
                                        const RopeScaling& scaling) {
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
  if (scaling.enabled) scale_like_llama3(inv_freq, scaling);
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
