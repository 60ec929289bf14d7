// One safetensors file: 8-byte little-endian header length, a JSON header mapping tensor names
// to {dtype, shape, data_offsets}, then the data section the offsets index into.
#include "model/safetensors.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "model/json_file.h"

namespace nanovllm {
namespace {

using nlohmann::json;

// The safetensors library refuses larger headers too; this bounds the JSON parse.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

class HeaderParser {
 public:
  HeaderParser(const std::filesystem::path& path, const std::byte* data_section, size_t data_size)
      : path_(path), data_section_(data_section), data_size_(data_size) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw Error(fmt::format("{}: {}", path_.string(), problem));
  }
  [[noreturn]] void fail_tensor(const std::string& name, const std::string& problem) const {
    fail(fmt::format("tensor '{}': {}", name, problem));
  }

  std::map<std::string, std::string> parse_metadata(const json& value) const {
    if (!value.is_object()) {
      fail(fmt::format("__metadata__ must be an object of strings, got {}", json_excerpt(value)));
    }
    std::map<std::string, std::string> metadata;
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) {
        fail(fmt::format("__metadata__ entry '{}' must be a string, got {}", key,
                         json_excerpt(item)));
      }
      metadata[key] = item.get<std::string>();
    }
    return metadata;
  }

  SafetensorsTensor parse_tensor(const std::string& name, const json& entry) const {
    if (!entry.is_object()) {
      fail_tensor(name, fmt::format("entry must be an object, got {}", json_excerpt(entry)));
    }
    for (const auto& [key, unused] : entry.items()) {
      if (key != "dtype" && key != "shape" && key != "data_offsets") {
        fail_tensor(name, fmt::format("unexpected key '{}'", key));
      }
    }
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(key)) fail_tensor(name, fmt::format("missing '{}'", key));
    }

    SafetensorsTensor tensor;
    tensor.name = name;
    tensor.file = path_;

    const json& dtype = entry["dtype"];
    if (!dtype.is_string()) fail_tensor(name, fmt::format("dtype must be a string"));
    const std::optional<DType> parsed = parse_safetensors_dtype(dtype.get<std::string>());
    if (!parsed) {
      fail_tensor(name, fmt::format("unsupported dtype '{}' (supported: BF16, F16, F32, I32, I64)",
                                    dtype.get<std::string>()));
    }
    tensor.dtype = *parsed;

    const json& shape = entry["shape"];
    if (!shape.is_array()) {
      fail_tensor(name, fmt::format("shape must be a list, got {}", json_excerpt(shape)));
    }
    uint64_t numel = 1;
    for (const json& extent : shape) {
      // A non-negative integer that also fits int64_t.
      if (!extent.is_number_unsigned() || extent.get<uint64_t>() > uint64_t{INT64_MAX}) {
        fail_tensor(name, fmt::format("shape must hold non-negative integers, got {}",
                                      json_excerpt(shape)));
      }
      const uint64_t value = extent.get<uint64_t>();
      if (__builtin_mul_overflow(numel, value, &numel) || numel > uint64_t{INT64_MAX}) {
        fail_tensor(name, fmt::format("shape {} has too many elements", json_excerpt(shape)));
      }
      tensor.shape.push_back(static_cast<int64_t>(value));
    }

    const json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      fail_tensor(name, fmt::format("data_offsets must be [begin, end] of non-negative integers, "
                                    "got {}",
                                    json_excerpt(offsets)));
    }
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    if (begin > end) {
      fail_tensor(name, fmt::format("data_offsets [{}, {}] begin after end", begin, end));
    }
    if (end > data_size_) {
      fail_tensor(name, fmt::format("data_offsets [{}, {}] run past the data section ({} bytes)",
                                    begin, end, data_size_));
    }
    uint64_t expected_bytes = 0;
    if (__builtin_mul_overflow(numel, uint64_t{dtype_size(tensor.dtype)}, &expected_bytes)) {
      fail_tensor(name, fmt::format("shape {} is too large", tensor.shape_string()));
    }
    if (end - begin != expected_bytes) {
      fail_tensor(name, fmt::format("data_offsets [{}, {}] hold {} bytes but {} {} needs {}", begin,
                                    end, end - begin, dtype.get<std::string>(),
                                    tensor.shape_string(), expected_bytes));
    }
    tensor.data = data_section_ + begin;
    tensor.nbytes = static_cast<size_t>(end - begin);
    return tensor;
  }

 private:
  const std::filesystem::path& path_;
  const std::byte* data_section_;
  size_t data_size_;
};

void check_no_overlap(const std::filesystem::path& path,
                      const std::map<std::string, SafetensorsTensor, std::less<>>& tensors) {
  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& [name, tensor] : tensors) {
    if (tensor.nbytes > 0) by_offset.push_back(&tensor);
  }
  std::sort(
      by_offset.begin(), by_offset.end(),
      [](const SafetensorsTensor* a, const SafetensorsTensor* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsTensor& previous = *by_offset[i - 1];
    const SafetensorsTensor& current = *by_offset[i];
    if (previous.data + previous.nbytes > current.data) {
      throw Error(fmt::format("{}: tensors '{}' and '{}' overlap in the data section",
                              path.string(), previous.name, current.name));
    }
  }
}

}  // namespace

std::optional<DType> parse_safetensors_dtype(std::string_view name) {
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  if (name == "F32") return DType::kF32;
  if (name == "I32") return DType::kI32;
  if (name == "I64") return DType::kI64;
  return std::nullopt;
}

int64_t SafetensorsTensor::numel() const {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

std::string SafetensorsTensor::shape_string() const {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return text + "]";
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : mapping_(path) {
  const size_t file_size = mapping_.size();
  if (file_size < 8) {
    throw Error(
        fmt::format("{}: too short for a safetensors file ({} bytes, the header length "
                    "alone takes 8)",
                    path.string(), file_size));
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) {
    header_size = (header_size << 8) | static_cast<uint8_t>(mapping_.data()[i]);
  }
  if (header_size > file_size - 8) {
    throw Error(fmt::format("{}: header length {} exceeds the {} bytes after the length field",
                            path.string(), header_size, file_size - 8));
  }
  if (header_size > kMaxHeaderBytes) {
    throw Error(fmt::format("{}: header length {} exceeds the limit of {} bytes", path.string(),
                            header_size, kMaxHeaderBytes));
  }
  const char* header_text = reinterpret_cast<const char*>(mapping_.data() + 8);
  const json header = parse_json_strict(std::string_view(header_text, header_size), path);
  if (!header.is_object()) {
    throw Error(fmt::format("{}: header must be a JSON object, got {}", path.string(),
                            json_excerpt(header)));
  }

  const std::byte* data_section = mapping_.data() + 8 + header_size;
  const HeaderParser parser(path, data_section, file_size - 8 - header_size);
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      metadata_ = parser.parse_metadata(entry);
    } else {
      tensors_.emplace(name, parser.parse_tensor(name, entry));
    }
  }
  check_no_overlap(path, tensors_);
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace nanovllm
