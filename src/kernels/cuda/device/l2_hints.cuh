// An L2 eviction priority for loads of data read once (Hopper). Weights are streamed once a
// step, far more than L2 holds, so they gain nothing from staying there: loaded evict-first,
// they leave the rest of L2 to what is read again soon (activations, the caches' new keys).
#pragma once

#include <cstdint>

namespace nanovllm::cuda {

// A policy for .L2::cache_hint operands (createpolicy; 1.0: every access of the load).
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

}  // namespace nanovllm::cuda
