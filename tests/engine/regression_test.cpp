// nano-vllm bugs this engine must not inherit (design notes, section 1), one test each.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine_harness.h"
#include "scheduler_harness.h"

namespace nanovllm {
namespace {

using namespace nanovllm::testing;

std::vector<int> with_tail(std::vector<int> tokens, std::initializer_list<int> tail) {
  tokens.insert(tokens.end(), tail);
  return tokens;
}

SamplingParams greedy(int max_tokens, bool ignore_eos = true) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.max_tokens = max_tokens;
  params.ignore_eos = ignore_eos;
  return params;
}

// A prompt whose every block is cached must still compute its last token (nano-vllm could
// schedule zero tokens for it).
TEST(Regression, FullyCachedPromptLeavingZeroTokensToPrefill) {
  SchedulerHarness h(small_config(16, 4, 100));
  h.add(iota_tokens(8), long_generation(1));  // exactly two full blocks
  h.step();
  ASSERT_EQ(h.scheduler.block_manager().hash_table().size(), 2u);
  Sequence* again = h.add(iota_tokens(8), long_generation(1));
  const ScheduledBatch batch = h.schedule();
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(again->num_cached_tokens, 4);  // the block holding the last token is recomputed
  EXPECT_EQ(batch.seqs[0].num_new_tokens, 4);
  EXPECT_TRUE(batch.seqs[0].samples);
  EXPECT_EQ(h.scheduler.block_manager().block(again->block_table[1]).ref_count, 1);
  h.complete(batch);

  // One token past the cached blocks: everything but that token comes from the cache.
  Sequence* longer = h.add(with_tail(iota_tokens(8), {77}), long_generation(1));
  const ScheduledBatch next = h.schedule();
  EXPECT_EQ(longer->num_cached_tokens, 8);
  EXPECT_EQ(next.seqs[0].num_new_tokens, 1);
  h.complete(next);

  // End to end: the same block-aligned prompt twice gives the reference output twice.
  FakeEngine fake = make_fake_engine(EngineSetup{});
  const std::vector<int> prompt = iota_tokens(8);
  const RequestOutput first = fake.engine->generate({prompt}, greedy(5), false)[0];
  const RequestOutput second = fake.engine->generate({prompt}, greedy(5), false)[0];
  expect_same_output(second, first, 0);
  expect_same_output(first, reference_generate(prompt, greedy(5), kEosTokenIds, 4096, 64), 0);
  EXPECT_GT(fake.engine->scheduler().stats().num_prefix_hit_tokens, 0);
}

// A preempted sequence loses its blocks; when re-admitted its cached count must be what the
// cache holds now, not what it had before.
TEST(Regression, PreemptedSequenceReadmittedWithStaleCachedCount) {
  for (bool prefix_caching : {true, false}) {
    SCOPED_TRACE(prefix_caching ? "prefix caching" : "no prefix caching");
    SchedulerHarness h(small_config(/*num_blocks=*/4, 4, 100, 16, prefix_caching));
    Sequence* a = h.add(iota_tokens(7));
    Sequence* b = h.add(iota_tokens(7, 30));
    h.step();
    h.step();  // 9 tokens each: 8 computed, blocks 0 and 1 full
    EXPECT_EQ(b->num_cached_tokens, 8);
    h.complete(h.schedule());  // a needs a block: b is preempted
    ASSERT_EQ(b->status, SequenceStatus::kWaiting);
    EXPECT_EQ(b->num_cached_tokens, 0);
    EXPECT_EQ(b->num_published_blocks, 0);
    EXPECT_TRUE(b->block_table.empty());
    // Let a finish with its next token, freeing the pool.
    a->params.max_tokens = a->num_completion_tokens() + 1;
    EXPECT_EQ(h.step().size(), 1u);
    const ScheduledBatch batch = h.schedule();  // b comes back
    ASSERT_EQ(batch.seqs.size(), 1u);
    ASSERT_EQ(batch.seqs[0].seq, b);
    // b's freed block 0 is still cached; its block 1 was freed first and handed to a.
    const int expected_cached = prefix_caching ? 4 : 0;
    EXPECT_EQ(b->num_cached_tokens, expected_cached);
    EXPECT_EQ(batch.seqs[0].num_new_tokens, b->num_tokens() - expected_cached);
    h.complete(batch);
  }
  // End to end under heavy preemption, against the reference.
  EngineSetup tiny;
  tiny.num_blocks = 12;
  const Workload workload = make_workload(21, 30, tiny.vocab_size, 12, 12, 20);
  FakeEngine fake = make_fake_engine(tiny);
  const std::vector<RequestOutput> outputs =
      fake.engine->generate(workload.prompts, workload.params, false);
  EXPECT_GT(fake.engine->scheduler().stats().num_preemptions, 0);
  expect_same_outputs(outputs, reference_outputs(workload, 4096, tiny.vocab_size));
}

// When a freed cached block is handed out again, its old hash must leave the table.
TEST(Regression, StaleHashTableEntriesAfterBlockReuse) {
  SchedulerHarness h(small_config(/*num_blocks=*/3, 4, 100));
  Sequence* a = h.add(iota_tokens(9), long_generation(1));
  h.step();  // a finished; its two full blocks are published and free
  ASSERT_EQ(a->status, SequenceStatus::kFinished);
  ASSERT_EQ(h.scheduler.block_manager().hash_table().size(), 2u);
  // A sequence that needs every block reuses a's.
  Sequence* b = h.add(iota_tokens(12, 100), long_generation(1));
  const ScheduledBatch batch = h.schedule();
  ASSERT_EQ(batch.seqs[0].seq, b);
  EXPECT_EQ(b->num_cached_tokens, 0);
  EXPECT_TRUE(h.scheduler.block_manager().hash_table().empty());
  for (int id : b->block_table) EXPECT_FALSE(h.scheduler.block_manager().block(id).has_hash);
  h.complete(batch);
  // a's prefix is gone: asking for it again is a miss, not a hit on b's K/V.
  Sequence* c = h.add(iota_tokens(9), long_generation(1));
  const ScheduledBatch again = h.schedule();
  EXPECT_EQ(c->num_cached_tokens, 0);
  EXPECT_EQ(again.seqs[0].num_new_tokens, 9);
  h.complete(again);
}

// Two sequences bringing the same new prefix in one step each compute their own blocks; the
// reference counts and the hash table stay exact, and later sequences share one copy.
TEST(Regression, TwoSequencesWithSameNewPrefixInOneStep) {
  SchedulerHarness h(small_config(/*num_blocks=*/12, 4, 100));
  Sequence* a = h.add(iota_tokens(9), long_generation(2));
  Sequence* b = h.add(iota_tokens(9), long_generation(2));
  const ScheduledBatch batch = h.schedule();
  ASSERT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(a->num_cached_tokens, 0);
  EXPECT_EQ(b->num_cached_tokens, 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(a->block_table[i], b->block_table[i]);
    EXPECT_EQ(h.scheduler.block_manager().block(a->block_table[i]).ref_count, 1);
    EXPECT_EQ(h.scheduler.block_manager().block(b->block_table[i]).ref_count, 1);
  }
  h.complete(batch);
  const auto& table = h.scheduler.block_manager().hash_table();
  EXPECT_EQ(table.size(), 2u);
  for (const auto& entry : table) {
    EXPECT_TRUE(entry.second == a->block_table[0] || entry.second == a->block_table[1]);
  }
  Sequence* c = h.add(with_tail(iota_tokens(8), {50}), long_generation(1));
  h.complete(h.schedule());
  EXPECT_EQ(c->finish_reason, "length");
  EXPECT_EQ(h.scheduler.stats().num_prefix_hit_tokens, 8);
  while (!h.scheduler.is_finished()) h.step();
  EXPECT_EQ(h.scheduler.block_manager().num_free_blocks(), 12);
  // End to end: many identical prompts in one step.
  FakeEngine fake = make_fake_engine(EngineSetup{});
  const std::vector<std::vector<int>> prompts(6, iota_tokens(13));
  const std::vector<RequestOutput> outputs = fake.engine->generate(prompts, greedy(6), false);
  for (const RequestOutput& output : outputs) {
    expect_same_output(output, reference_generate(prompts[0], greedy(6), kEosTokenIds, 4096, 64),
                       0);
  }
  expect_pool_empty(*fake.engine);
}

// A block becomes findable only after the step that wrote its K/V: a sequence admitted while
// another is still prefilling the same prompt must not count unwritten blocks as cached.
TEST(Regression, HashPublishedBeforeKVComputed) {
  SchedulerHarness h(small_config(16, 4, /*max_num_batched_tokens=*/7));
  Sequence* a = h.add(iota_tokens(12));
  const ScheduledBatch first = h.schedule();  // a: tokens [0, 7)
  EXPECT_TRUE(h.scheduler.block_manager().hash_table().empty());
  h.complete(first);
  EXPECT_EQ(h.scheduler.block_manager().hash_table().size(), 1u);  // block 0 only
  Sequence* b = h.add(with_tail(iota_tokens(12), {99}));
  const ScheduledBatch second = h.schedule();  // a: [7, 12), then b with 2 tokens of budget
  ASSERT_EQ(second.seqs.size(), 2u);
  ASSERT_EQ(second.seqs[1].seq, b);
  EXPECT_EQ(b->num_cached_tokens, 4);
  EXPECT_EQ(b->block_table[0], a->block_table[0]);
  EXPECT_NE(b->block_table[1], a->block_table[1]);
  h.complete(second);
  // End to end the fake executor also checks that every cached position was written earlier.
  EngineSetup chunked;
  chunked.max_num_batched_tokens = 7;
  const std::vector<std::vector<int>> prompts = {iota_tokens(30), with_tail(iota_tokens(30), {5}),
                                                 with_tail(iota_tokens(30), {6, 7})};
  FakeEngine fake = make_fake_engine(chunked);
  const std::vector<RequestOutput> outputs = fake.engine->generate(prompts, greedy(4), false);
  for (size_t i = 0; i < prompts.size(); ++i) {
    expect_same_output(outputs[i],
                       reference_generate(prompts[i], greedy(4), kEosTokenIds, 4096, 64), i);
  }
}

// nano-vllm asserted when the only running sequence could not get a block. Here a sequence
// is never longer than the KV cache, so alone it always fits; with others it yields.
TEST(Regression, OnlyRunningSequenceMustPreemptItself) {
  EngineSetup tiny;
  tiny.num_blocks = 2;  // 8 tokens in all
  FakeEngine fake = make_fake_engine(tiny);
  EXPECT_EQ(fake.engine->max_model_len(), 8);
  const RequestOutput output = fake.engine->generate({iota_tokens(7)}, greedy(100), false)[0];
  EXPECT_TRUE(output.ok()) << output.error;
  EXPECT_EQ(output.finish_reason, "length");
  EXPECT_EQ(output.token_ids.size(), 1u);  // 7 + 1 = 8 tokens fill the cache
  expect_pool_empty(*fake.engine);

  // Two sequences that outgrow the pool together: one yields its blocks and later finishes.
  EngineSetup small;
  small.num_blocks = 5;
  FakeEngine pair = make_fake_engine(small);
  const std::vector<std::vector<int>> prompts = {iota_tokens(7), iota_tokens(7, 30)};
  const std::vector<RequestOutput> outputs = pair.engine->generate(prompts, greedy(12), false);
  EXPECT_GT(pair.engine->scheduler().stats().num_preemptions, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    expect_same_output(outputs[i], reference_generate(prompts[i], greedy(12), kEosTokenIds, 20, 64),
                       i);
  }
}

// A request that can never run gets an error of its own; the others are served.
TEST(Regression, PromptThatCanNeverFit) {
  EngineSetup setup;
  setup.num_blocks = 4;  // 16 tokens
  setup.max_model_len = 4096;
  FakeEngine fake = make_fake_engine(setup);
  SamplingParams bad_params = greedy(3);
  bad_params.top_p = 0.0f;
  SamplingParams with_stop = greedy(3);
  with_stop.stop = {"x"};
  const std::vector<std::vector<int>> prompts = {
      iota_tokens(5), iota_tokens(20), iota_tokens(5, 10), {}, {1, 64, 2}, {1, -1}, {1}, {2}};
  const std::vector<SamplingParams> params = {greedy(3), greedy(3), greedy(3),  greedy(3),
                                              greedy(3), greedy(3), bad_params, with_stop};
  const std::vector<RequestOutput> outputs = fake.engine->generate(prompts, params, false);
  ASSERT_EQ(outputs.size(), prompts.size());
  const auto expect_error = [&](size_t i, const std::string& needle) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    EXPECT_FALSE(outputs[i].ok());
    EXPECT_NE(outputs[i].error.find(needle), std::string::npos) << outputs[i].error;
    EXPECT_TRUE(outputs[i].token_ids.empty());
    EXPECT_EQ(outputs[i].prompt_token_ids, prompts[i]);
  };
  expect_error(1, "KV cache");
  expect_error(3, "empty");
  expect_error(4, "vocabulary");
  expect_error(5, "vocabulary");
  expect_error(6, "top_p");
  expect_error(7, "stop strings need a text decoder");
  for (size_t i : {0u, 2u}) {
    EXPECT_TRUE(outputs[i].ok()) << outputs[i].error;
    expect_same_output(outputs[i], reference_generate(prompts[i], greedy(3), kEosTokenIds, 16, 64),
                       i);
  }
  expect_pool_empty(*fake.engine);

  // Over max_model_len (not the cache) names max_model_len.
  EngineSetup short_model;
  short_model.max_model_len = 10;
  const RequestOutput too_long =
      make_fake_engine(short_model).engine->generate({iota_tokens(11)}, greedy(3), false)[0];
  EXPECT_NE(too_long.error.find("max_model_len 10"), std::string::npos) << too_long.error;
}

}  // namespace
}  // namespace nanovllm
