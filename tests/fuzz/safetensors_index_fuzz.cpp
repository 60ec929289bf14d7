// model.safetensors.index.json next to two valid shards: the weight map, shard names (which
// must stay in the directory), and its cross-checks with what the shards hold. Every tensor of
// an accepted checkpoint must be found under its name in one of the files.
#include "core/check.h"
#include "fuzz_support.h"
#include "model/safetensors.h"

using namespace nanovllm;

namespace {

const std::filesystem::path& checkpoint_dir() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path path = fuzz::scratch().path();
    testing::write_safetensors(path / "model-00001-of-00002.safetensors",
                               {testing::make_tensor("a", DType::kF32, {2, 2}, {1, 2, 3, 4}),
                                testing::make_tensor("b", DType::kBF16, {3}, {1, 2, 3})});
    testing::write_safetensors(path / "model-00002-of-00002.safetensors",
                               {testing::make_tensor("c", DType::kF16, {1}, {5})});
    return path;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path& dir = checkpoint_dir();
  testing::write_file(dir / SafetensorsCheckpoint::kIndexFileName, fuzz::as_text(data, size));
  try {
    const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir);
    for (const auto& [name, tensor] : checkpoint.tensors()) {
      FUZZ_ASSERT(tensor != nullptr && tensor->name == name);
      FUZZ_ASSERT(checkpoint.find(name) == tensor);
    }
  } catch (const Error&) {
  }
  return 0;
}
