#include "model/tensor_dump.h"

#include <bit>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/ranges.h>

#include "core/check.h"

namespace nanovllm {
namespace {

static_assert(std::endian::native == std::endian::little, "npy files are written little-endian");

std::filesystem::path dump_dir_from_env() {
  const char* dir = std::getenv("NANOVLLM_DUMP_DIR");
  return dir != nullptr ? std::filesystem::path(dir) : std::filesystem::path();
}

std::string npy_header(DType dtype, const std::vector<int64_t>& shape) {
  std::string dims = fmt::format("{}", fmt::join(shape, ", "));
  if (shape.size() == 1) dims += ",";  // (3,) for one dimension, (3, 4) for two
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                   dtype == DType::kF32 ? "<f4" : "<i4", dims);
  // magic (6) + version (2) + length (2) + header, padded with spaces and ended by a newline
  // to a multiple of 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  return header;
}

}  // namespace

TensorDumper::TensorDumper(Backend& backend) : TensorDumper(backend, dump_dir_from_env()) {}

TensorDumper::TensorDumper(Backend& backend, std::filesystem::path dir)
    : backend_(backend), dir_(std::move(dir)) {
  if (!enabled()) return;
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) {
    throw Error(fmt::format("cannot create the tensor dump directory {}: {}", dir_.string(),
                            error.message()));
  }
}

void TensorDumper::dump(std::string_view name, const Tensor& tensor) {
  if (!enabled()) return;
  const DType dtype = tensor.dtype();
  NVLLM_CHECK_MSG(dtype != DType::kI64, "cannot dump {} of {}: int64 is not written", name,
                  tensor.shape_string());
  NVLLM_CHECK_MSG(tensor.is_contiguous(), "cannot dump {}: {} is not contiguous", name,
                  tensor.shape_string());
  staging_.resize(tensor.nbytes());
  backend_.download(staging_.data(), tensor);
  if (dtype == DType::kBF16 || dtype == DType::kF16) {
    // Half-precision activations are written as float32, exactly.
    const auto* half = reinterpret_cast<const uint16_t*>(staging_.data());
    std::vector<char> widened(static_cast<size_t>(tensor.numel()) * sizeof(float));
    auto* out = reinterpret_cast<float*>(widened.data());
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      out[i] = dtype == DType::kBF16 ? bf16_to_float(half[i]) : fp16_to_float(half[i]);
    }
    staging_ = std::move(widened);
  }
  std::vector<int64_t> shape;
  for (int i = 0; i < tensor.ndim(); ++i) shape.push_back(tensor.size(i));
  write_npy(dir_ / (std::string(name) + ".npy"), dtype == DType::kI32 ? DType::kI32 : DType::kF32,
            staging_.data(), shape);
}

void write_npy(const std::filesystem::path& path, DType dtype, const void* data,
               const std::vector<int64_t>& shape) {
  NVLLM_CHECK_MSG(dtype == DType::kF32 || dtype == DType::kI32, "npy of {} is not supported",
                  dtype_name(dtype));
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  const std::string header = npy_header(dtype, shape);
  const uint16_t header_len = static_cast<uint16_t>(header.size());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(fmt::format("cannot open {} for writing", path.string()));
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const char length[2] = {static_cast<char>(header_len & 0xff), static_cast<char>(header_len >> 8)};
  out.write(magic, sizeof(magic));
  out.write(length, sizeof(length));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(count * 4));
  if (!out) throw Error(fmt::format("failed writing {}", path.string()));
}

}  // namespace nanovllm
