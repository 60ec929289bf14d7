// Random weights of the right shapes, for benchmarks without a checkpoint.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/backend.h"
#include "model/weight_loading.h"

namespace nanovllm {

// Element `index` of the dummy tensor `name`: approximately normal with mean 0 and std 0.02
// (transformers' initializer_range), bounded by +-0.07 so activations stay finite through many
// layers. A pure function of name and index: identical for every thread count and run.
float dummy_weight_value(std::string_view name, int64_t index);

// Fills every slot: RMSNorm gains with 1 (as transformers initializes them), everything else
// with dummy_weight_value, converted to the backend's compute dtype.
void fill_dummy_weights(const std::vector<WeightSlot>& slots, Backend& backend);

}  // namespace nanovllm
