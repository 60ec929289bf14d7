// Host-side conversion of weight data between the floating dtypes, and the chunked upload of
// converted data to a backend through one reusable staging buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/dtype.h"
#include "kernels/backend.h"

namespace nanovllm {

// True for the dtypes weights may be stored and computed in: BF16, F16, F32.
bool is_floating(DType dtype);

// Converts `count` elements from `src` (dtype `from`, any alignment) to `dst` (dtype `to`),
// rounding to nearest even. Returns how many finite inputs became infinite (values beyond the
// range of `to`), so callers can refuse a lossy load. Both dtypes must be floating.
int64_t convert_elements(const void* src, DType from, void* dst, DType to, int64_t count);

// convert_elements split across the machine's cores.
int64_t convert_elements_parallel(const void* src, DType from, void* dst, DType to, int64_t count);

class StagedUploader {
 public:
  // Writes elements [first, first + count) of the destination, in its dtype, to `host`.
  using Producer = std::function<void(void* host, int64_t first, int64_t count)>;

  explicit StagedUploader(Backend& backend, size_t staging_bytes = size_t{64} << 20);

  // Fills the contiguous device tensor `dst` chunk by chunk: produce into the staging buffer,
  // then upload. The staging buffer grows to at most staging_bytes.
  void upload(const Tensor& dst, const Producer& produce);

 private:
  Backend& backend_;
  size_t staging_limit_;
  std::unique_ptr<std::byte[]> staging_;
  size_t staging_size_ = 0;
};

}  // namespace nanovllm
