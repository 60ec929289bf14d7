// How much shared memory a CTA asks for to decide which CTAs share an SM with it.
#pragma once

#include <cstddef>

namespace nanovllm::cuda {

// At least `needed` bytes, and at least half of an SM's shared memory (less what the driver keeps
// for each CTA): at most two such CTAs fit on an SM, and no CTA of another kernel fits beside
// two of them. The decode kernels at small batches ask for this where keeping other kernels'
// CTAs away (and their weight streams with them) pays more than the room it leaves unused
// (docs/BENCHMARKS.md). On the current device.
size_t half_sm_shared_memory(size_t needed);

}  // namespace nanovllm::cuda
