#include <cstring>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"

namespace nanovllm::cpu {

namespace {

// The indices, each checked to be within [0, rows).
const int32_t* checked_indices(const Tensor& indices, int64_t rows) {
  check_tensor(indices, "gather indices", DType::kI32, 1);
  const int32_t* index = indices.data_as<int32_t>();
  for (int64_t i = 0; i < indices.size(0); ++i) {
    NVLLM_CHECK_MSG(index[i] >= 0 && index[i] < rows, "gather index {} at {} is outside [0, {})",
                    index[i], i, rows);
  }
  return index;
}

// dst[i, :] = src[index[i], :] for rows of `width` floats; indices already checked.
void copy_indexed_rows(const float* src, const int32_t* index, int64_t count, int64_t width,
                       float* dst, ThreadPool& pool) {
  const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
  pool.parallel_for(count, width, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::memcpy(dst + i * width, src + static_cast<int64_t>(index[i]) * width, row_bytes);
    }
  });
}

}  // namespace

void gather_rows(const Tensor& x, const Tensor& indices, Tensor out, ThreadPool& pool) {
  check_tensor(x, "gather_rows x", DType::kF32, 2);
  const int64_t width = x.size(1);
  const int64_t count = indices.size(0);
  check_shape(out, "gather_rows out", DType::kF32, {count, width});
  const int32_t* index = checked_indices(indices, x.size(0));
  copy_indexed_rows(x.data_as<float>(), index, count, width, out.data_as<float>(), pool);
}

void gather_ids(const Tensor& ids, const Tensor& indices, Tensor out) {
  check_tensor(ids, "gather_ids ids", DType::kI32, 1);
  const int64_t count = indices.size(0);
  check_shape(out, "gather_ids out", DType::kI32, {count});
  const int32_t* index = checked_indices(indices, ids.size(0));
  const int32_t* src = ids.data_as<int32_t>();
  int32_t* dst = out.data_as<int32_t>();
  for (int64_t i = 0; i < count; ++i) dst[i] = src[index[i]];
}

void copy_rows(const Tensor& x, Tensor out) {
  check_tensor(x, "copy_rows x", DType::kF32, 2);
  check_shape(out, "copy_rows out", DType::kF32, {x.size(0), x.size(1)});
  for (int64_t r = 0; r < x.size(0); ++r) {
    std::memcpy(out.data_as<float>() + r * out.stride(0), x.data_as<float>() + r * x.stride(0),
                x.size(1) * sizeof(float));
  }
}

}  // namespace nanovllm::cpu
