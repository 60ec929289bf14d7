#include <cstdlib>
#include <string_view>

#include "kernels/cuda/launch.cuh"

namespace nanovllm::cuda {

bool overlapped_launches_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("NANOVLLM_PDL");
    return value == nullptr || std::string_view(value) != "0";
  }();
  return enabled;
}

}  // namespace nanovllm::cuda
