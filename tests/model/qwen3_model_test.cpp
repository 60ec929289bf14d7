// The Qwen3 forward against a plain dense reimplementation in double, the rotary table against
// Hugging Face's float32 arithmetic, tensor dumps, and input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "model/decoder/decoder_model.h"
#include "model/rotary.h"
#include "model/tensor_dump.h"
#include "qwen3_model_test_util.h"

namespace nanovllm {
namespace {

using test::PagedKvCache;
using test::Step;
using test::TestSequence;

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

// y[t] = x[t] @ w^T for a weight tensor [out, in].
Matrix matmul_t(const Matrix& x, const Tensor& w) {
  const int64_t out = w.size(0), in = w.size(1);
  const float* ws = w.data_as<float>();
  Matrix y(x.size(), std::vector<double>(out));
  for (size_t t = 0; t < x.size(); ++t) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0.0;
      for (int64_t i = 0; i < in; ++i) sum += x[t][i] * ws[o * in + i];
      y[t][o] = sum;
    }
  }
  return y;
}

// RMSNorm of x[offset, offset + n) in place, with weight w [n].
void rms_norm_span(std::vector<double>& x, size_t offset, size_t n, const Tensor& w, double eps) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += x[offset + i] * x[offset + i];
  const double inv = 1.0 / std::sqrt(sum / n + eps);
  for (size_t i = 0; i < n; ++i) x[offset + i] *= inv * w.data_as<float>()[i];
}

Matrix rms_norm_rows(Matrix x, const Tensor& w, double eps) {
  for (auto& row : x) rms_norm_span(row, 0, row.size(), w, eps);
  return x;
}

// Logits [T][vocab] of every position of `ids` processed as one full causal sequence:
// HF Qwen3ForCausalLM written out with no cache, no fusion and double arithmetic.
Matrix reference_logits(const ModelConfig& c, const DecoderWeights& w,
                        const std::vector<int32_t>& ids) {
  const int T = static_cast<int>(ids.size());
  const int H = c.hidden_size, D = c.head_dim, nq = c.num_attention_heads;
  const int nkv = c.num_key_value_heads, I = c.intermediate_size;
  const double eps = c.rms_norm_eps;
  Matrix x(T, std::vector<double>(H));
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < H; ++i) x[t][i] = w.embed_tokens.data_as<float>()[ids[t] * H + i];
  }
  for (const DecoderLayerWeights& layer : w.layers) {
    Matrix qkv = matmul_t(rms_norm_rows(x, layer.input_layernorm, eps), layer.qkv_proj);
    for (int t = 0; t < T; ++t) {
      for (int head = 0; head < nq + nkv; ++head) {
        rms_norm_span(qkv[t], head * D, D, head < nq ? layer.q_norm : layer.k_norm, eps);
        std::vector<double> rotated(D);
        for (int i = 0; i < D / 2; ++i) {
          const double angle = t / std::pow(c.rope_theta, 2.0 * i / D);
          const double x1 = qkv[t][head * D + i], x2 = qkv[t][head * D + D / 2 + i];
          rotated[i] = x1 * std::cos(angle) - x2 * std::sin(angle);
          rotated[D / 2 + i] = x2 * std::cos(angle) + x1 * std::sin(angle);
        }
        std::copy(rotated.begin(), rotated.end(), qkv[t].begin() + head * D);
      }
    }
    Matrix attn(T, std::vector<double>(nq * D, 0.0));
    for (int t = 0; t < T; ++t) {
      for (int head = 0; head < nq; ++head) {
        const int kv = head / (nq / nkv);
        const size_t k_at = (nq + kv) * D, v_at = (nq + nkv + kv) * D;
        std::vector<double> p(t + 1);
        double max_score = -INFINITY, total = 0.0;
        for (int j = 0; j <= t; ++j) {
          double s = 0.0;
          for (int i = 0; i < D; ++i) s += qkv[t][head * D + i] * qkv[j][k_at + i];
          p[j] = s / std::sqrt(static_cast<double>(D));
          max_score = std::max(max_score, p[j]);
        }
        for (double& e : p) total += (e = std::exp(e - max_score));
        for (int j = 0; j <= t; ++j) {
          for (int i = 0; i < D; ++i) attn[t][head * D + i] += p[j] / total * qkv[j][v_at + i];
        }
      }
    }
    const Matrix o = matmul_t(attn, layer.o_proj);
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < H; ++i) x[t][i] += o[t][i];
    }
    const Matrix gate_up =
        matmul_t(rms_norm_rows(x, layer.post_attention_layernorm, eps), layer.gate_up_proj);
    Matrix act(T, std::vector<double>(I));
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < I; ++i) {
        const double g = gate_up[t][i];
        act[t][i] = g / (1.0 + std::exp(-g)) * gate_up[t][I + i];
      }
    }
    const Matrix mlp = matmul_t(act, layer.down_proj);
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < H; ++i) x[t][i] += mlp[t][i];
    }
  }
  return matmul_t(rms_norm_rows(x, w.norm, eps), w.lm_head);
}

// |got - want| <= 1e-4 * (|want| + max |want| of the row): relative, with logits near zero
// measured against the row's scale.
void expect_logits_close(const std::vector<float>& got, const std::vector<double>& want,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0.0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::abs(got[i] - want[i]), 1e-4 * (std::abs(want[i]) + scale))
        << what << ": logit " << i << " is " << got[i] << ", expected " << want[i];
  }
}

TEST(DecoderModel, MatchesDenseReferenceUntiedAndTied) {
  auto backend = make_cpu_backend(2);
  for (bool tied : {false, true}) {
    const ModelConfig config = test::tiny_config(tied);
    DecoderWeights weights = test::random_weights(config, 7);
    const Matrix expected =
        reference_logits(config, weights, test::random_tokens(23, config.vocab_size, 3));
    DecoderModel model(config, std::move(weights), *backend);
    PagedKvCache cache(config, 8, 4);
    TestSequence seq{test::random_tokens(23, config.vocab_size, 3)};
    const auto logits = test::run_step(model, cache, {Step{&seq, 23}});
    ASSERT_EQ(logits.size(), 23u);
    for (int t = 0; t < 23; ++t) {
      expect_logits_close(logits[t], expected[t], fmt::format("tied={} position {}", tied, t));
    }
  }
}

TEST(RotaryTable, ReproducesHuggingFaceFloat32Angles) {
  // cos/sin from transformers' Qwen3RotaryEmbedding (torch 2.11, transformers 5.17, theta 1e6,
  // head_dim 128), which works in float32: inv = 1.0 / (base ** (arange(0, 128, 2).float() / 128));
  // angle = float32(p) * inv[i]. A double-precision pipeline misses these by up to 1.6e-3 at
  // position 40959 and 6.6e-5 at 4095.
  struct Expected {
    int position, column;
    float cos, sin;
  };
  const Expected cases[] = {
      {1, 1, 6.925038695e-01f, 7.214141488e-01f},
      {1, 63, 1.000000000e+00f, 1.240937763e-06f},
      {1000, 1, -2.370625362e-02f, 9.997189641e-01f},
      {1000, 17, 9.392951727e-01f, 3.431102335e-01f},
      {4095, 1, 3.138588071e-01f, 9.494696856e-01f},
      {4095, 17, -7.774500251e-01f, -6.289447546e-01f},
      {40959, 1, 6.060039997e-01f, 7.954615951e-01f},
      {40959, 17, 7.329996824e-01f, 6.802289486e-01f},
      {40959, 40, 5.399072766e-01f, 8.417245150e-01f},
      {40959, 63, 9.987085462e-01f, 5.080568790e-02f},
  };
  const std::vector<float> table = rotary_cos_sin_table(40960, 128, 1000000.0);
  for (const Expected& e : cases) {
    const float* row = table.data() + static_cast<size_t>(e.position) * 128;
    EXPECT_NEAR(row[e.column], e.cos, 2e-7) << "cos at " << e.position << ", " << e.column;
    EXPECT_NEAR(row[64 + e.column], e.sin, 2e-7) << "sin at " << e.position << ", " << e.column;
  }
  EXPECT_EQ(table[0], 1.0f);   // position 0: cos 1
  EXPECT_EQ(table[64], 0.0f);  // and sin 0
}

// Reads a .npy header written by write_npy: returns the shape text and the data offset.
std::pair<std::string, size_t> read_npy_header(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY") << path;
  const size_t header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u) << path;
  const std::string header = bytes.substr(10, header_len);
  const size_t open = header.find("'shape': (");
  const size_t close = header.find(')', open);
  return {header.substr(open + 10, close - open - 10), 10 + header_len};
}

TEST(DecoderModel, DumpsNamedIntermediatesWhenAskedTo) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("nanovllm_dump_{}", ::getpid());
  std::filesystem::remove_all(dir);
  auto backend = make_cpu_backend(1);
  const ModelConfig config = test::tiny_config();
  ::setenv("NANOVLLM_DUMP_DIR", dir.c_str(), 1);
  DecoderModel model(config, test::random_weights(config, 5), *backend);
  ::unsetenv("NANOVLLM_DUMP_DIR");
  PagedKvCache cache(config, 4, 16);
  TestSequence seq{test::random_tokens(6, config.vocab_size, 1)};
  const auto logits = test::run_step(model, cache, {Step{&seq, 6}});

  const std::pair<const char*, const char*> expected[] = {
      {"input_ids", "6,"},
      {"positions", "6,"},
      {"embed", "6, 64"},
      {"layer0.input_norm", "6, 64"},
      {"layer0.qkv", "6, 1024"},
      {"layer1.qk_rope", "6, 1024"},
      {"layer1.attn", "6, 512"},
      {"layer2.attn_out", "6, 64"},
      {"layer0.post_attention_norm", "6, 64"},
      {"layer2.gate_up", "6, 160"},
      {"layer2.mlp_act", "6, 80"},
      {"layer1.mlp_out", "6, 64"},
      {"layer0.output", "6, 64"},
      {"layer2.output", "6, 64"},
      {"final_norm", "6, 64"},
      {"last_hidden", "6, 64"},
      {"logits", "6, 101"},
  };
  for (const auto& [name, shape] : expected) {
    const auto path = dir / (std::string(name) + ".npy");
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    EXPECT_EQ(read_npy_header(path).first, shape) << name;
  }
  // The dumped logits are the returned ones.
  const auto [shape, offset] = read_npy_header(dir / "logits.npy");
  std::ifstream in(dir / "logits.npy", std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::vector<float> dumped(6 * 101);
  in.read(reinterpret_cast<char*>(dumped.data()), dumped.size() * sizeof(float));
  for (int r = 0; r < 6; ++r) {
    for (int v = 0; v < 101; ++v) ASSERT_EQ(dumped[r * 101 + v], logits[r][v]);
  }
  std::filesystem::remove_all(dir);
}

TEST(DecoderModel, NoDumpsWithoutTheVariable) {
  ::unsetenv("NANOVLLM_DUMP_DIR");
  auto backend = make_cpu_backend(1);
  TensorDumper dumper(*backend);
  EXPECT_FALSE(dumper.enabled());
}

TEST(DecoderModel, RejectsWeightsThatDoNotMatchTheConfig) {
  auto backend = make_cpu_backend(1);
  ModelConfig config = test::tiny_config();
  DecoderWeights weights = test::random_weights(config, 1);
  config.intermediate_size = 81;
  try {
    DecoderModel model(config, std::move(weights), *backend);
    ADD_FAILURE() << "mismatched weights were accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("layers.0.gate_up_proj"), std::string::npos)
        << error.what();
  }
}

TEST(DecoderModel, BadTokenIdsAndPositionsAreErrors) {
  auto backend = make_cpu_backend(1);
  const ModelConfig config = test::tiny_config();
  DecoderModel model(config, test::random_weights(config, 2), *backend);
  {
    // A negative id is no id at all. (One past the vocabulary is another rank's row of a
    // vocabulary-parallel embedding, a zero row here: the engine refuses such ids earlier.)
    PagedKvCache cache(config, 4, 16);
    TestSequence seq{{1, 2, -5}};
    EXPECT_THROW(test::run_step(model, cache, {Step{&seq, 3}}), Error);
  }
  {
    PagedKvCache cache(config, 40, 16);
    TestSequence seq{test::random_tokens(config.max_position_embeddings + 1, config.vocab_size, 4)};
    seq.computed = config.max_position_embeddings;  // pretend the prefix is cached
    EXPECT_THROW(test::run_step(model, cache, {Step{&seq, 1}}), Error);
  }
}

}  // namespace
}  // namespace nanovllm
