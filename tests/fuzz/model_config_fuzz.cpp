// config.json and generation_config.json: the input as a model's config.json (then the KV cache
// arithmetic the engine does with an accepted config), and as the generation_config.json next to
// a valid config.json.
#include "core/check.h"
#include "engine/kv_cache_sizing.h"
#include "fuzz_support.h"
#include "model/model_config.h"
#include "nanovllm/engine_config.h"

using namespace nanovllm;

namespace {

// What the engine derives from a config: max_model_len and the KV cache size for a budget.
void size_the_engine(const ModelConfig& config) {
  EngineConfig engine;
  const int max_model_len = engine.resolved_max_model_len(config.max_position_embeddings);
  FUZZ_ASSERT(max_model_len > 0 && max_model_len <= engine.max_model_len);
  KVCacheShape shape;
  shape.num_layers = config.num_hidden_layers;
  shape.num_kv_heads = config.num_key_value_heads;
  shape.head_dim = config.head_dim;
  shape.block_size = engine.kvcache_block_size;
  shape.dtype = config.torch_dtype;
  try {
    const int blocks = cpu_num_kvcache_blocks(shape, kDefaultCpuKVCacheBytes, size_t{8} << 30,
                                              engine.max_num_seqs, max_model_len);
    FUZZ_ASSERT(blocks > 0);
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  static const testing::TempDir model_dir;
  testing::write_file(model_dir / "config.json", text);
  try {
    size_the_engine(load_model_config(model_dir.path()));
  } catch (const Error&) {
  }

  static const testing::TempDir generation_dir;
  static const ModelConfig valid = [] {
    std::filesystem::copy_file(fuzz::test_data("models/qwen3-tiny-tied/config.json"),
                               generation_dir / "config.json");
    return load_model_config(generation_dir.path());
  }();
  testing::write_file(generation_dir / "generation_config.json", text);
  try {
    load_generation_config(generation_dir.path(), valid);
  } catch (const Error&) {
  }
  return 0;
}
