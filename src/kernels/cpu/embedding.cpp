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

  copy_indexed_rows(weight.data_as<float>(), id, tokens, hidden, out.data_as<float>(), pool);
}

}  // namespace nanovllm::cpu
