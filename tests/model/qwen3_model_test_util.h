// Shared pieces of the Qwen3 forward tests: a tiny config, random weights on the CPU backend,
// a paged KV cache, and a batch builder that hands out cache blocks in shuffled order.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/buffer.h"
#include "kernels/backend.h"
#include "model/decoder/decoder_model.h"

namespace nanovllm::test {

// hidden 64 with 4 heads of head_dim 128: head_dim is not hidden / heads, as in real Qwen3.
inline ModelConfig tiny_config(bool tied = false) {
  ModelConfig c;
  c.model_type = "qwen3";
  c.vocab_size = 101;
  c.hidden_size = 64;
  c.intermediate_size = 80;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 128;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.max_position_embeddings = 512;
  c.tie_word_embeddings = tied;
  c.qk_norm = true;
  c.torch_dtype = DType::kF32;
  return c;
}

// Random weights of the config's shapes; linear weights scaled by 1/sqrt(fan_in) so the
// activations stay of order one through the layers.
inline DecoderWeights random_weights(const ModelConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  DecoderWeights w;
  auto make = [&](std::initializer_list<int64_t> shape, float lo, float hi) {
    OwnedTensor owned(DType::kF32, shape);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t i = 0; i < owned.tensor.numel(); ++i) owned.tensor.data_as<float>()[i] = dist(rng);
    w.storage.push_back(std::move(owned.buffer));
    return owned.tensor;
  };
  auto linear = [&](int64_t out, int64_t in) {
    const float a = 1.5f / std::sqrt(static_cast<float>(in));
    return make({out, in}, -a, a);
  };
  const int64_t h = c.hidden_size, d = c.head_dim;
  const int64_t qkv = (c.num_attention_heads + 2 * c.num_key_value_heads) * d;
  w.embed_tokens = make({c.vocab_size, h}, -1.0f, 1.0f);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    DecoderLayerWeights layer;
    layer.input_layernorm = make({h}, 0.8f, 1.2f);
    layer.qkv_proj = linear(qkv, h);
    layer.q_norm = make({d}, 0.8f, 1.2f);
    layer.k_norm = make({d}, 0.8f, 1.2f);
    layer.o_proj = linear(h, c.num_attention_heads * d);
    layer.post_attention_layernorm = make({h}, 0.8f, 1.2f);
    layer.gate_up_proj = linear(2 * c.intermediate_size, h);
    layer.down_proj = linear(h, c.intermediate_size);
    w.layers.push_back(layer);
  }
  w.norm = make({h}, 0.8f, 1.2f);
  w.lm_head = c.tie_word_embeddings ? w.embed_tokens : linear(c.vocab_size, h);
  return w;
}

inline std::vector<int32_t> random_tokens(int count, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(count);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  return tokens;
}

// One layer entry per model layer: [num_blocks, block_size, kv_heads, head_dim], NaN-filled so
// a read of a slot never written shows up in the logits.
class PagedKvCache {
 public:
  PagedKvCache(const ModelConfig& c, int num_blocks, int block_size) : block_size_(block_size) {
    for (int i = 0; i < c.num_hidden_layers; ++i) {
      for (int kv = 0; kv < 2; ++kv) {
        storage_.emplace_back(DType::kF32,
                              std::initializer_list<int64_t>{num_blocks, block_size,
                                                             c.num_key_value_heads, c.head_dim});
        Tensor& t = storage_.back().tensor;
        std::fill_n(t.data_as<float>(), t.numel(), std::numeric_limits<float>::quiet_NaN());
      }
      layers_.push_back({storage_[2 * i].tensor, storage_[2 * i + 1].tensor});
    }
    free_.resize(num_blocks);
    for (int b = 0; b < num_blocks; ++b) free_[b] = b;
    std::shuffle(free_.begin(), free_.end(), std::mt19937(static_cast<uint32_t>(num_blocks)));
  }

  const std::vector<LayerKVCache>& layers() const { return layers_; }
  int block_size() const { return block_size_; }
  int32_t take_block() {
    EXPECT_FALSE(free_.empty()) << "test cache ran out of blocks";
    const int32_t block = free_.back();
    free_.pop_back();
    return block;
  }
  void shuffle_free_blocks(uint32_t seed) {
    std::shuffle(free_.begin(), free_.end(), std::mt19937(seed));
  }

 private:
  int block_size_;
  std::vector<OwnedTensor> storage_;
  std::vector<LayerKVCache> layers_;
  std::vector<int32_t> free_;
};

// A sequence's tokens, how many of them have K/V in the cache, and the blocks holding them.
struct TestSequence {
  explicit TestSequence(std::vector<int32_t> all_tokens) : tokens(std::move(all_tokens)) {}

  std::vector<int32_t> tokens;
  int computed = 0;
  std::vector<int32_t> block_table;
};

// This step computes tokens [seq->computed, seq->computed + count) of seq.
struct Step {
  TestSequence* seq;
  int count;
};

// The tensors of one batch and the ForwardBatch viewing them; logits for every row.
struct BuiltBatch {
  OwnedTensor ids, positions, last_rows, cu, context, tables, slots;
  ForwardBatch batch;
};

inline OwnedTensor ints(const std::vector<int32_t>& values, std::initializer_list<int64_t> shape) {
  OwnedTensor owned(DType::kI32, shape);
  std::copy(values.begin(), values.end(), owned.tensor.data_as<int32_t>());
  return owned;
}

// Grows each sequence's block table as a block manager would, and lays out the batch as the
// model runner does: rows of sequence i at [cu[i], cu[i+1]), context = computed + count.
inline BuiltBatch build_batch(const std::vector<Step>& steps, PagedKvCache& cache) {
  const int bs = cache.block_size();
  std::vector<int32_t> ids, positions, cu = {0}, context, slots;
  int max_q = 0, max_k = 0;
  size_t max_blocks = 1;
  for (const Step& step : steps) {
    TestSequence& seq = *step.seq;
    const int end = seq.computed + step.count;
    while (static_cast<int>(seq.block_table.size()) * bs < end) {
      seq.block_table.push_back(cache.take_block());
    }
    for (int p = seq.computed; p < end; ++p) {
      ids.push_back(seq.tokens.at(p));
      positions.push_back(p);
      slots.push_back(seq.block_table[p / bs] * bs + p % bs);
    }
    cu.push_back(cu.back() + step.count);
    context.push_back(end);
    max_q = std::max(max_q, step.count);
    max_k = std::max(max_k, end);
    max_blocks = std::max(max_blocks, seq.block_table.size());
  }
  std::vector<int32_t> tables(steps.size() * max_blocks, -1);
  for (size_t i = 0; i < steps.size(); ++i) {
    std::copy(steps[i].seq->block_table.begin(), steps[i].seq->block_table.end(),
              tables.begin() + i * max_blocks);
  }
  const int64_t tokens = static_cast<int64_t>(ids.size());
  const int64_t num_seqs = static_cast<int64_t>(steps.size());
  std::vector<int32_t> every_row(tokens);
  for (int32_t r = 0; r < tokens; ++r) every_row[r] = r;

  BuiltBatch b{
      ints(ids, {tokens}),       ints(positions, {tokens}),
      ints(every_row, {tokens}), ints(cu, {num_seqs + 1}),
      ints(context, {num_seqs}), ints(tables, {num_seqs, static_cast<int64_t>(max_blocks)}),
      ints(slots, {tokens}),     {}};
  b.batch.input_ids = b.ids.tensor;
  b.batch.positions = b.positions.tensor;
  b.batch.last_token_indices = b.last_rows.tensor;
  AttentionMetadata& m = b.batch.attention;
  m.num_seqs = static_cast<int>(num_seqs);
  m.max_seqlen_q = max_q;
  m.max_seqlen_k = max_k;
  m.cu_seqlens_q = b.cu.tensor;
  m.context_lens = b.context.tensor;
  m.block_tables = b.tables.tensor;
  m.slot_mapping = b.slots.tensor;
  return b;
}

// Runs one step and returns the logits of every row, [rows][vocab]; advances the sequences.
inline std::vector<std::vector<float>> run_step(DecoderModel& model, PagedKvCache& cache,
                                                const std::vector<Step>& steps) {
  BuiltBatch built = build_batch(steps, cache);
  const Tensor logits = model.forward(built.batch, cache.layers());
  std::vector<std::vector<float>> rows(logits.size(0));
  for (int64_t r = 0; r < logits.size(0); ++r) {
    const float* row = logits.data_as<float>() + r * logits.size(1);
    rows[r].assign(row, row + logits.size(1));
  }
  for (const Step& step : steps) step.seq->computed += step.count;
  return rows;
}

}  // namespace nanovllm::test
