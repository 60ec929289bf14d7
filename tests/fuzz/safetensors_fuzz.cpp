// A single safetensors file: the 8-byte header length, the JSON header (dtypes, shapes, data
// offsets, metadata) and the data section. Every tensor it accepts must lie inside the file
// and hold exactly the bytes its dtype and shape need.
#include "core/check.h"
#include "fuzz_support.h"
#include "model/safetensors.h"

using namespace nanovllm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path path = fuzz::scratch() / "model.safetensors";
  testing::write_file(path, fuzz::as_text(data, size));
  try {
    const SafetensorsFile file(path);
    for (const auto& [name, tensor] : file.tensors()) {
      FUZZ_ASSERT(static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype) == tensor.nbytes);
      if (tensor.nbytes == 0) continue;
      // Reading the first and last byte: AddressSanitizer knows the mapping's bounds.
      const auto* begin = reinterpret_cast<const volatile uint8_t*>(tensor.data);
      (void)begin[0];
      (void)begin[tensor.nbytes - 1];
    }
  } catch (const Error&) {
  }
  return 0;
}
