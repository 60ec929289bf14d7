// The same tokens give the same logits however the work is scheduled: one prefill, a prefix
// then one-token decode steps, uneven chunks, several sequences in one batch; for block sizes
// 1, 16 and 256 and blocks handed out in shuffled order.
#include <gtest/gtest.h>

#include <cmath>

#include "model/decoder/decoder_model.h"
#include "qwen3_model_test_util.h"

namespace nanovllm {
namespace {

using test::PagedKvCache;
using test::Step;
using test::TestSequence;
using Logits = std::vector<std::vector<float>>;  // [position][vocab]

// Logits of every position of `tokens`, computed in chunks of the given sizes.
Logits logits_by_schedule(DecoderModel& model, const std::vector<int32_t>& tokens,
                          const std::vector<int>& chunks, int block_size, uint32_t block_seed) {
  const int blocks = static_cast<int>(tokens.size()) / block_size + 3;
  PagedKvCache cache(model.config(), blocks, block_size);
  cache.shuffle_free_blocks(block_seed);
  TestSequence seq{tokens};
  Logits all;
  for (int chunk : chunks) {
    for (auto& row : test::run_step(model, cache, {Step{&seq, chunk}})) all.push_back(row);
  }
  EXPECT_EQ(all.size(), tokens.size());
  return all;
}

// Every logit within 1e-4 of the reference, relative to the largest logit of its row.
void expect_same_logits(const Logits& got, const Logits& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t p = 0; p < want.size(); ++p) {
    float scale = 0.0f;
    for (float v : want[p]) scale = std::max(scale, std::abs(v));
    for (size_t v = 0; v < want[p].size(); ++v) {
      ASSERT_LE(std::abs(got[p][v] - want[p][v]), 1e-4f * scale)
          << what << ": position " << p << " logit " << v;
    }
  }
}

std::vector<int> prefix_then_decode(int prefix, int total) {
  std::vector<int> chunks = {prefix};
  chunks.resize(total - prefix + 1, 1);
  return chunks;
}

TEST(DecoderModelSchedules, PrefillEqualsPrefixPlusDecodeEqualsChunkedAcrossBlockLayouts) {
  auto backend = make_cpu_backend(2);
  const ModelConfig config = test::tiny_config();
  DecoderModel model(config, test::random_weights(config, 11), *backend);
  const std::vector<int32_t> tokens = test::random_tokens(40, config.vocab_size, 12);
  const Logits full = logits_by_schedule(model, tokens, {40}, 16, 0);

  for (int block_size : {1, 16, 256}) {
    for (uint32_t seed : {1u, 2u}) {
      const std::string where = fmt::format("block size {}, block order {}", block_size, seed);
      expect_same_logits(logits_by_schedule(model, tokens, {40}, block_size, seed), full,
                         "one prefill, " + where);
      expect_same_logits(
          logits_by_schedule(model, tokens, prefix_then_decode(13, 40), block_size, seed), full,
          "prefix + decode, " + where);
      expect_same_logits(logits_by_schedule(model, tokens, {7, 16, 1, 16}, block_size, seed), full,
                         "chunked prefill, " + where);
    }
  }
  // Decode from the very first token.
  expect_same_logits(logits_by_schedule(model, tokens, prefix_then_decode(1, 40), 16, 3), full,
                     "decode from one token");
}

TEST(DecoderModelSchedules, MixedBatchesMatchEachSequenceAlone) {
  auto backend = make_cpu_backend(3);
  const ModelConfig config = test::tiny_config();
  DecoderModel model(config, test::random_weights(config, 21), *backend);
  const std::vector<int> lengths = {20, 25, 31, 3};
  std::vector<Logits> alone;
  std::vector<TestSequence> seqs;
  for (size_t i = 0; i < lengths.size(); ++i) {
    seqs.emplace_back(test::random_tokens(lengths[i], config.vocab_size, 30 + i));
    alone.push_back(logits_by_schedule(model, seqs.back().tokens, {lengths[i]}, 16, 0));
  }

  for (int block_size : {1, 16, 256}) {
    for (TestSequence& s : seqs) {
      s.computed = 0;
      s.block_table.clear();
    }
    PagedKvCache cache(config, 80, block_size);
    std::vector<Logits> got(seqs.size());
    auto run = [&](const std::vector<std::pair<int, int>>& plan) {  // (sequence, count)
      std::vector<Step> steps;
      for (auto [i, count] : plan) steps.push_back({&seqs[i], count});
      const Logits rows = test::run_step(model, cache, steps);
      size_t r = 0;
      for (auto [i, count] : plan) {
        for (int k = 0; k < count; ++k) got[i].push_back(rows[r++]);
      }
    };
    run({{0, 20}, {1, 11}, {2, 30}, {3, 1}});  // prefills of different lengths
    run({{1, 14}, {2, 1}, {3, 1}});            // the rest of 1 as a chunk, decodes of 2 and 3
    run({{3, 1}});                             // a decode batch of one
    for (size_t i = 0; i < seqs.size(); ++i) {
      expect_same_logits(got[i], alone[i],
                         fmt::format("sequence {} in a mixed batch, block size {}", i, block_size));
    }
  }
}

TEST(DecoderModelSchedules, WorkspaceShrinksAndGrowsBetweenCalls) {
  // A small batch after a large one (buffers larger than needed) and a larger one after it.
  auto backend = make_cpu_backend(1);
  const ModelConfig config = test::tiny_config();
  DecoderModel model(config, test::random_weights(config, 41), *backend);
  const std::vector<int32_t> tokens = test::random_tokens(30, config.vocab_size, 42);
  const Logits full = logits_by_schedule(model, tokens, {30}, 16, 0);
  const std::vector<int32_t> small(tokens.begin(), tokens.begin() + 5);
  const Logits prefix = logits_by_schedule(model, small, {5}, 16, 0);
  expect_same_logits(prefix, Logits(full.begin(), full.begin() + 5), "short after long");
  expect_same_logits(logits_by_schedule(model, tokens, {30}, 16, 0), full, "long again");
}

}  // namespace
}  // namespace nanovllm
