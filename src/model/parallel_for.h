// Splitting host loops over the machine's cores (weight conversion and generation).
#pragma once

#include <cstdint>
#include <functional>

namespace nanovllm {

// Calls body(begin, end) on disjoint ranges covering [0, count), in parallel when the work is
// at least two grains; ranges hold at least `grain` items except the last. Rethrows the first
// exception a body throws once all have finished.
void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace nanovllm
