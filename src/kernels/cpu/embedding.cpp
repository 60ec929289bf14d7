#include <cstring>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"

namespace nanovllm::cpu {

void embedding(const Tensor& ids, const Tensor& weight, Tensor out, ThreadPool& pool) {
  check_tensor(ids, "ids", DType::kI32, 1);
  check_tensor(weight, "embedding weight", DType::kF32, 2);
  const int64_t tokens = ids.size(0);
  const int64_t vocab = weight.size(0);
  const int64_t hidden = weight.size(1);
  check_shape(out, "embedding out", DType::kF32, {tokens, hidden});

  const int32_t* id = ids.data_as<int32_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    if (id[t] < 0 || id[t] >= vocab) {
      throw Error(fmt::format("token id {} at position {} is outside the vocabulary [0, {})", id[t],
                              t, vocab));
    }
  }

  const float* table = weight.data_as<float>();
  float* dst = out.data_as<float>();
  const size_t row_bytes = static_cast<size_t>(hidden) * sizeof(float);
  pool.parallel_for(tokens, hidden, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      std::memcpy(dst + t * hidden, table + static_cast<int64_t>(id[t]) * hidden, row_bytes);
    }
  });
}

}  // namespace nanovllm::cpu
