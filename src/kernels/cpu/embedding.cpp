#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"

namespace nanovllm::cpu {

void embedding(const Tensor& ids, const Tensor& weight, int64_t first_id, Tensor out,
               ThreadPool& pool) {
  check_tensor(ids, "ids", DType::kI32, 1);
  check_tensor(weight, "embedding weight", DType::kF32, 2);
  const int64_t tokens = ids.size(0);
  const int64_t vocab = weight.size(0);
  const int64_t hidden = weight.size(1);
  check_shape(out, "embedding out", DType::kF32, {tokens, hidden});

  const int32_t* id = ids.data_as<int32_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    if (id[t] < 0) throw Error(fmt::format("token id {} at position {} is negative", id[t], t));
  }
  // Rows of this shard, zeros for the ids of other ranks' shards.
  float* rows = out.data_as<float>();
  const float* table = weight.data_as<float>();
  pool.parallel_for(tokens, hidden, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t row = int64_t{id[t]} - first_id;
      float* dst = rows + t * hidden;
      if (row >= 0 && row < vocab) {
        std::memcpy(dst, table + row * hidden, hidden * sizeof(float));
      } else {
        std::fill(dst, dst + hidden, 0.0f);
      }
    }
  });
}

}  // namespace nanovllm::cpu
