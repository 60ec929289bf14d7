// A whole file mapped read-only into memory.
#pragma once

#include <cstddef>
#include <filesystem>

namespace nanovllm {

class MappedFile {
 public:
  // Maps `path`; a missing, unreadable or non-regular file is an Error naming it.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void unmap();

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;  // null for an empty file
  size_t size_ = 0;
};

}  // namespace nanovllm
