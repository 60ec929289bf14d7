// What the fuzz targets share: the input as text, a scratch directory for inputs the code under
// test reads as files, the test data, and a check that aborts (a crash libFuzzer reports) when a
// property the code promises does not hold. A nanovllm::Error is a clean rejection of bad
// input; any other exception escapes and is a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "model_test_files.h"

namespace nanovllm::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// One directory per process, removed at exit.
inline const testing::TempDir& scratch() {
  static const testing::TempDir dir;
  return dir;
}

inline std::filesystem::path test_data(const char* relative) {
  return std::filesystem::path(NANOVLLM_TEST_DATA_DIR) / relative;
}

}  // namespace nanovllm::fuzz

#define FUZZ_ASSERT(cond)                                                                \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
