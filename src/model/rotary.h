// The rotary-embedding table the qk_norm_rope op reads.
#pragma once

#include <vector>

#include "model/model_config.h"

namespace nanovllm {

// The rotary table [max_positions, head_dim]: row p holds cos(p * inv_freq) for the first
// head_dim / 2 columns and sin(p * inv_freq) for the rest, inv_freq[i] = 1 / theta^(2i / head_dim),
// rescaled as Llama 3 does where `scaling` is enabled. Computed in float32 step by step as
// Hugging Face's models (and nano-vllm) do, so angles at positions in the thousands round the
// same way.
std::vector<float> rotary_cos_sin_table(int max_positions, int head_dim, double theta,
                                        const RopeScaling& scaling = {});

}  // namespace nanovllm
