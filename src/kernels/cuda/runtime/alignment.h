// Pointer alignment, for the launchers' checks before vector loads, cp.async and TMA.
#pragma once

#include <cstdint>

namespace nanovllm::cuda {

inline bool aligned_to(const void* pointer, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(pointer) % bytes == 0;
}

}  // namespace nanovllm::cuda
