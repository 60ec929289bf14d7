// The fused decode kernel (every layer of a decode batch in one launch) against the same model
// run op by op: Qwen3Model on the CUDA backend with it (NANOVLLM_FUSED_DECODE=1) and without,
// and on the CPU backend in f32, over random weights rounded to the dtype under test. Prompts
// of odd lengths (contexts of one to several attention splits) are prefilled op by op, then
// several decode steps compare logits and the K/V each path stored. Block tables are shuffled,
// unwritten cache slots hold NaN, and GPU batches carry padding rows (context 0, no slot), as
// captured graphs do.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../model/qwen3_model_test_util.h"
#include "cuda_test_util.h"
#include "kernels/cuda/fused_decode.h"
#include "model/qwen3_weight_layout.h"

namespace nanovllm::test {
namespace {

struct Geometry {
  int head_dim;
  int num_heads;
  int num_kv_heads;
  int block_size;
};

ModelConfig fused_config(const Geometry& g) {
  ModelConfig c = tiny_config();
  c.vocab_size = 300;
  c.hidden_size = 256;
  c.intermediate_size = 352;  // 11 steps of 32: rows split unevenly over the CTAs
  c.num_hidden_layers = 3;
  c.num_attention_heads = g.num_heads;
  c.num_key_value_heads = g.num_kv_heads;
  c.head_dim = g.head_dim;
  c.max_position_embeddings = 2048;
  return c;
}

void round_weights(Qwen3Weights& w, DType dtype) {
  const auto round = [&](Tensor& t) {
    const std::vector<float> rounded = round_to(dtype, values_of(t));
    std::copy(rounded.begin(), rounded.end(), t.data_as<float>());
  };
  round(w.embed_tokens);
  round(w.norm);
  if (w.lm_head.data() != w.embed_tokens.data()) round(w.lm_head);
  for (Qwen3LayerWeights& l : w.layers) {
    for (Tensor* t : {&l.input_layernorm, &l.qkv_proj, &l.q_norm, &l.k_norm, &l.o_proj,
                      &l.post_attention_layernorm, &l.gate_up_proj, &l.down_proj}) {
      round(*t);
    }
  }
}

Qwen3Weights upload_weights(const ModelConfig& c, const Qwen3Weights& host, Backend& backend) {
  Qwen3Weights device = allocate_qwen3_weights(c, backend);
  upload_into(backend, device.embed_tokens, values_of(host.embed_tokens));
  upload_into(backend, device.norm, values_of(host.norm));
  if (!c.tie_word_embeddings) upload_into(backend, device.lm_head, values_of(host.lm_head));
  for (size_t i = 0; i < host.layers.size(); ++i) {
    const Qwen3LayerWeights& h = host.layers[i];
    const Qwen3LayerWeights& d = device.layers[i];
    upload_into(backend, d.input_layernorm, values_of(h.input_layernorm));
    upload_into(backend, d.qkv_proj, values_of(h.qkv_proj));
    upload_into(backend, d.q_norm, values_of(h.q_norm));
    upload_into(backend, d.k_norm, values_of(h.k_norm));
    upload_into(backend, d.o_proj, values_of(h.o_proj));
    upload_into(backend, d.post_attention_layernorm, values_of(h.post_attention_layernorm));
    upload_into(backend, d.gate_up_proj, values_of(h.gate_up_proj));
    upload_into(backend, d.down_proj, values_of(h.down_proj));
  }
  return device;
}

// A model on the CUDA backend with its own NaN-filled paged cache (same block ids as the
// CPU cache the test allocates from).
struct GpuModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Qwen3Model> model;
  std::vector<DeviceTensor> cache_storage;
  std::vector<LayerKVCache> cache;

  GpuModel(const ModelConfig& c, const Qwen3Weights& host, DType dtype, bool fused, int num_blocks,
           int block_size) {
    if (fused) setenv("NANOVLLM_FUSED_DECODE", "1", 1);
    backend = make_cuda_backend(dtype);
    unsetenv("NANOVLLM_FUSED_DECODE");
    model = std::make_unique<Qwen3Model>(c, upload_weights(c, host, *backend), *backend);
    cache_storage.reserve(2 * c.num_hidden_layers);
    for (int i = 0; i < 2 * c.num_hidden_layers; ++i) {
      cache_storage.emplace_back(*backend, dtype,
                                 std::initializer_list<int64_t>{num_blocks, block_size,
                                                                c.num_key_value_heads, c.head_dim});
      poison(*backend, cache_storage.back().tensor());
    }
    for (int i = 0; i < c.num_hidden_layers; ++i) {
      cache.push_back({cache_storage[2 * i].tensor(), cache_storage[2 * i + 1].tensor()});
    }
  }

  // The batch's int tensors on the device, `padding` decode rows appended (token 0, position
  // 0, no slot, context 0); logits of every row.
  std::vector<float> forward(const BuiltBatch& built, int padding) {
    const ForwardBatch& b = built.batch;
    const auto grow = [&](const Tensor& t, int32_t fill) {
      std::vector<int32_t> v(t.data_as<int32_t>(), t.data_as<int32_t>() + t.numel());
      v.insert(v.end(), padding, fill);
      return v;
    };
    std::vector<int32_t> cu = grow(b.attention.cu_seqlens_q, 0);
    for (int i = 0; i < padding; ++i)
      cu[cu.size() - padding + i] = cu[cu.size() - padding - 1] + i + 1;
    std::vector<int32_t> last = grow(b.last_token_indices, 0);
    const int64_t rows = static_cast<int64_t>(last.size());
    for (int64_t r = 0; r < rows; ++r) last[r] = static_cast<int32_t>(r);
    const int64_t width = b.attention.block_tables.size(1);
    std::vector<int32_t> tables(
        b.attention.block_tables.data_as<int32_t>(),
        b.attention.block_tables.data_as<int32_t>() + b.attention.block_tables.numel());
    tables.insert(tables.end(), padding * width, -1);
    const int64_t seqs = b.attention.num_seqs + padding;
    std::vector<DeviceTensor> held;
    held.push_back(upload_ints(*backend, {rows}, grow(b.input_ids, 0)));
    held.push_back(upload_ints(*backend, {rows}, grow(b.positions, 0)));
    held.push_back(upload_ints(*backend, {rows}, last));
    held.push_back(upload_ints(*backend, {seqs + 1}, cu));
    held.push_back(upload_ints(*backend, {seqs}, grow(b.attention.context_lens, 0)));
    held.push_back(upload_ints(*backend, {seqs, width}, tables));
    held.push_back(upload_ints(*backend, {rows}, grow(b.attention.slot_mapping, -1)));
    ForwardBatch device;
    device.input_ids = held[0].tensor();
    device.positions = held[1].tensor();
    device.last_token_indices = held[2].tensor();
    device.attention = b.attention;
    device.attention.num_seqs = static_cast<int>(seqs);
    device.attention.cu_seqlens_q = held[3].tensor();
    device.attention.context_lens = held[4].tensor();
    device.attention.block_tables = held[5].tensor();
    device.attention.slot_mapping = held[6].tensor();
    return download_floats(*backend, model->forward(device, cache));
  }
};

std::vector<float> rows_of(const std::vector<float>& logits, int64_t first, int64_t count,
                           int64_t vocab) {
  return {logits.begin() + first * vocab, logits.begin() + (first + count) * vocab};
}

double relative_error(const std::vector<float>& actual, const std::vector<float>& expected) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    diff += (static_cast<double>(actual[i]) - expected[i]) * (actual[i] - expected[i]);
    norm += static_cast<double>(expected[i]) * expected[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

class CudaFusedDecodeTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { NVLLM_REQUIRE_CUDA(); }
};

TEST_P(CudaFusedDecodeTest, MatchesTheLayerByLayerForward) {
  const DType dtype = GetParam();
  // Qwen3's head_dim 128 with GQA 2; head_dim 64 with 8 query heads per kv head (the most).
  for (const Geometry& g : {Geometry{128, 4, 2, 16}, Geometry{64, 8, 1, 64}}) {
    for (const std::vector<int>& prompts : {std::vector<int>{700}, std::vector<int>{1, 1100, 16},
                                            std::vector<int>{5, 17, 33, 64, 2, 90, 130, 7}}) {
      const std::string label =
          fmt::format("{} head_dim {} block {} prompts {}", dtype_label(dtype), g.head_dim,
                      g.block_size, prompts.size());
      SCOPED_TRACE(label);
      const ModelConfig c = fused_config(g);
      Qwen3Weights host = random_weights(c, 11);
      round_weights(host, dtype);
      const int num_blocks = 128;
      PagedKvCache cpu_cache(c, num_blocks, g.block_size);
      auto cpu_backend = make_cpu_backend(2);
      Qwen3Model cpu(c, std::move(host), *cpu_backend);
      Qwen3Weights again = random_weights(c, 11);
      round_weights(again, dtype);
      GpuModel fused(c, again, dtype, true, num_blocks, g.block_size);
      GpuModel separate(c, again, dtype, false, num_blocks, g.block_size);

      std::vector<TestSequence> seqs;
      for (size_t i = 0; i < prompts.size(); ++i) {
        seqs.emplace_back(random_tokens(prompts[i] + 4, c.vocab_size, 100 + i));
      }
      std::vector<Step> prefill;
      for (TestSequence& s : seqs) prefill.push_back({&s, static_cast<int>(s.tokens.size()) - 4});
      const BuiltBatch prompt_batch = build_batch(prefill, cpu_cache);
      cpu.forward(prompt_batch.batch, cpu_cache.layers());
      fused.forward(prompt_batch, 0);
      separate.forward(prompt_batch, 0);
      for (Step& s : prefill) s.seq->computed += s.count;

      const int64_t rows = static_cast<int64_t>(seqs.size());
      // Batch 1 as it is; other batches padded, up to the kernel's most rows.
      const int padding = rows == 1 ? 0 : std::min<int>(2, cuda::kFusedDecodeMaxRows - rows);
      cuda::FusedDecodeShape shape{dtype,
                                   c.num_hidden_layers,
                                   static_cast<int>(rows + padding),
                                   c.hidden_size,
                                   c.intermediate_size,
                                   c.num_attention_heads,
                                   c.num_key_value_heads,
                                   c.head_dim,
                                   g.block_size};
      ASSERT_TRUE(cuda::fused_decode_supported(shape)) << "the fused kernel would not run";
      for (int step = 0; step < 4; ++step) {
        std::vector<Step> decode;
        for (TestSequence& s : seqs) decode.push_back({&s, 1});
        const BuiltBatch batch = build_batch(decode, cpu_cache);
        const Tensor cpu_logits = cpu.forward(batch.batch, cpu_cache.layers());
        const std::vector<float> expected = values_of(cpu_logits);
        const std::vector<float> with = fused.forward(batch, padding);
        const std::vector<float> without = separate.forward(batch, padding);
        for (TestSequence& s : seqs) s.computed += 1;

        ASSERT_EQ(with.size(), static_cast<size_t>((rows + padding) * c.vocab_size));
        const std::vector<float> real = rows_of(with, 0, rows, c.vocab_size);
        const std::vector<float> real_separate = rows_of(without, 0, rows, c.vocab_size);
        // As close to the op-by-op GPU path as rounding allows, and no further from the f32
        // CPU forward than twice that path's own distance.
        expect_relative_error(with, without, relative_tolerance(dtype), label + " vs separate");
        const double own = relative_error(real_separate, expected);
        const double fused_error = relative_error(real, expected);
        EXPECT_LE(fused_error, std::max(2.0 * own, 1e-3))
            << label << " step " << step << ": separate path's error " << own;
      }
      // The K/V both GPU paths stored (the rest of each cache is NaN in both, or equal).
      for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
        for (int kv = 0; kv < 2; ++kv) {
          std::vector<float> a =
              download_floats(*fused.backend, fused.cache_storage[2 * layer + kv].tensor());
          std::vector<float> b =
              download_floats(*separate.backend, separate.cache_storage[2 * layer + kv].tensor());
          size_t written = 0;
          for (size_t i = 0; i < a.size(); ++i) {
            ASSERT_EQ(std::isnan(a[i]), std::isnan(b[i]))
                << label << " layer " << layer << " element " << i;
            if (std::isnan(a[i]))
              a[i] = b[i] = 0.0f;
            else
              ++written;
          }
          EXPECT_GT(written, 0u);
          expect_relative_error(a, b, relative_tolerance(dtype), label + " cache");
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaFusedDecodeTest, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_label(info.param));
                         });

}  // namespace
}  // namespace nanovllm::test
