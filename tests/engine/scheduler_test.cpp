// Scheduler: prefill first, chunked prefill, decode, preemption, postprocess.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "scheduler_harness.h"

namespace nanovllm {
namespace {

using testing::iota_tokens;
using testing::long_generation;
using testing::SchedulerHarness;
using testing::small_config;

TEST(Scheduler, PrefillFirstThenDecode) {
  SchedulerHarness h(small_config(16, 4, 100));
  Sequence* a = h.add(iota_tokens(5));
  Sequence* b = h.add(iota_tokens(3, 50));
  ScheduledBatch batch = h.schedule();
  ASSERT_TRUE(batch.is_prefill);
  ASSERT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(batch.seqs[0].seq, a);
  EXPECT_EQ(batch.seqs[0].num_new_tokens, 5);
  EXPECT_EQ(batch.seqs[1].num_new_tokens, 3);
  EXPECT_TRUE(batch.seqs[0].samples && batch.seqs[1].samples);
  h.complete(batch);
  EXPECT_EQ(a->num_tokens(), 6);
  EXPECT_EQ(a->num_cached_tokens, 5);
  batch = h.schedule();
  EXPECT_FALSE(batch.is_prefill);
  ASSERT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(batch.seqs[0].seq, a);
  EXPECT_EQ(batch.seqs[1].seq, b);
  for (const ScheduledSequence& entry : batch.seqs) EXPECT_EQ(entry.num_new_tokens, 1);
}

TEST(Scheduler, NewPromptsRunBeforeDecodes) {
  SchedulerHarness h(small_config(16, 4, 100));
  h.add(iota_tokens(5));
  h.step();
  Sequence* late = h.add(iota_tokens(4, 30));
  const ScheduledBatch batch = h.schedule();
  EXPECT_TRUE(batch.is_prefill);
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq, late);
}

TEST(Scheduler, AdmissionRespectsMaxNumSeqs) {
  SchedulerHarness h(small_config(32, 4, 100, /*max_num_seqs=*/2));
  h.add(iota_tokens(3));
  h.add(iota_tokens(3, 10));
  Sequence* third = h.add(iota_tokens(3, 20));
  ScheduledBatch batch = h.schedule();
  EXPECT_EQ(batch.seqs.size(), 2u);
  h.complete(batch);
  batch = h.schedule();  // two running already: the third keeps waiting
  EXPECT_FALSE(batch.is_prefill);
  EXPECT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(third->status, SequenceStatus::kWaiting);
}

TEST(Scheduler, PromptBeyondTokenBudgetIsChunked) {
  SchedulerHarness h(small_config(16, 4, /*max_num_batched_tokens=*/4));
  Sequence* seq = h.add(iota_tokens(10));
  const int expected_chunks[] = {4, 4, 2};
  int cached = 0;
  for (int chunk : expected_chunks) {
    const ScheduledBatch batch = h.schedule();
    ASSERT_TRUE(batch.is_prefill);
    ASSERT_EQ(batch.seqs.size(), 1u);
    EXPECT_EQ(batch.seqs[0].num_new_tokens, chunk);
    EXPECT_EQ(batch.seqs[0].samples, cached + chunk == 10);
    EXPECT_EQ(seq->block_table.size(), 3u);  // blocks for the whole prompt from the start
    h.complete(batch);
    cached += chunk;
    EXPECT_EQ(seq->num_cached_tokens, cached);
  }
  EXPECT_EQ(seq->num_tokens(), 11);
  EXPECT_EQ(seq->status, SequenceStatus::kRunning);
  EXPECT_EQ(h.scheduler.stats().num_partial_prefills, 2);
  EXPECT_FALSE(h.schedule().is_prefill);
}

TEST(Scheduler, ChunkedPromptStaysAtHeadOfWaitingUntilItsLastChunk) {
  SchedulerHarness h(small_config(16, 4, /*max_num_batched_tokens=*/8));
  Sequence* a = h.add(iota_tokens(6));
  Sequence* b = h.add(iota_tokens(6, 40));
  Sequence* c = h.add(iota_tokens(2, 80));
  ScheduledBatch batch = h.schedule();
  ASSERT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(batch.seqs[1].seq, b);
  EXPECT_EQ(batch.seqs[1].num_new_tokens, 2);
  EXPECT_FALSE(batch.seqs[1].samples);
  h.complete(batch);
  EXPECT_EQ(a->status, SequenceStatus::kRunning);
  EXPECT_EQ(h.scheduler.waiting().front(), b);
  batch = h.schedule();  // b's remaining 4 tokens first, then c joins
  ASSERT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(batch.seqs[0].seq, b);
  EXPECT_EQ(batch.seqs[0].num_new_tokens, 4);
  EXPECT_TRUE(batch.seqs[0].samples);
  EXPECT_EQ(batch.seqs[1].seq, c);
  h.complete(batch);
  EXPECT_TRUE(h.scheduler.waiting().empty());
}

TEST(Scheduler, AdmissionWaitsForFreeBlocks) {
  SchedulerHarness h(small_config(/*num_blocks=*/3, 4, 100));
  Sequence* a = h.add(iota_tokens(8), long_generation(2));
  Sequence* b = h.add(iota_tokens(8, 30));
  ScheduledBatch batch = h.schedule();
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq, a);
  h.complete(batch);
  batch = h.schedule();  // b still does not fit: a decodes
  EXPECT_FALSE(batch.is_prefill);
  const std::vector<Sequence*> finished = h.complete(batch);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0], a);
  batch = h.schedule();
  ASSERT_TRUE(batch.is_prefill);
  EXPECT_EQ(batch.seqs[0].seq, b);
}

TEST(Scheduler, DecodePreemptsFromTheTailOfRunning) {
  SchedulerHarness h(small_config(/*num_blocks=*/4, 4, 100));
  Sequence* a = h.add(iota_tokens(7));
  Sequence* b = h.add(iota_tokens(7, 30));
  h.step();  // both prefilled: 8 tokens each, 2 blocks each, pool full
  h.step();  // decode position 7: still in block 1
  EXPECT_EQ(h.scheduler.block_manager().num_free_blocks(), 0);
  const ScheduledBatch batch = h.schedule();  // position 8 needs a third block each
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq, a);
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  EXPECT_TRUE(b->block_table.empty());
  EXPECT_EQ(b->num_cached_tokens, 0);
  EXPECT_EQ(h.scheduler.waiting().front(), b);
  EXPECT_EQ(h.scheduler.stats().num_preemptions, 1);
}

TEST(Scheduler, PreemptedSequencesRejoinAtHeadOfWaitingInOrder) {
  SchedulerHarness h(small_config(/*num_blocks=*/5, 4, 100));
  Sequence* a = h.add(iota_tokens(7));
  Sequence* b = h.add(iota_tokens(7, 30));
  Sequence* c = h.add(iota_tokens(3, 60));
  Sequence* d = h.add(iota_tokens(3, 90));  // does not fit yet
  h.step();
  h.step();  // a, b: 9 tokens in 2 blocks; c: 5 tokens in 1 block; pool full
  // a needs a block: c (the tail) is preempted; then b needs one and, with nobody behind it,
  // preempts itself.
  const ScheduledBatch batch = h.schedule();
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq, a);
  ASSERT_EQ(h.scheduler.waiting().size(), 3u);
  EXPECT_EQ(h.scheduler.waiting()[0], b);
  EXPECT_EQ(h.scheduler.waiting()[1], c);
  EXPECT_EQ(h.scheduler.waiting()[2], d);
  EXPECT_EQ(h.scheduler.stats().num_preemptions, 2);
}

TEST(Scheduler, SequenceThatMustPreemptItselfGoesBackToWaiting) {
  SchedulerHarness h(small_config(/*num_blocks=*/5, 4, 100));
  Sequence* a = h.add(iota_tokens(7), long_generation(6));
  Sequence* b = h.add(iota_tokens(7, 30));
  h.step();
  h.step();  // 9 tokens each, 4 blocks used, 1 free
  const ScheduledBatch batch = h.schedule();
  // a takes the last block; b finds nobody behind it to preempt and yields its own blocks.
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq, a);
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  EXPECT_EQ(h.scheduler.waiting().front(), b);
  h.complete(batch);
  // b comes back once a is done and finishes normally.
  int guard = 0;
  while (!h.scheduler.is_finished() && ++guard < 1000) {
    const ScheduledBatch next = h.schedule();
    ASSERT_FALSE(next.empty());
    h.complete(next);
    if (b->status == SequenceStatus::kRunning && b->num_completion_tokens() > 5) break;
  }
  EXPECT_EQ(a->status, SequenceStatus::kFinished);
  EXPECT_EQ(a->num_completion_tokens(), 6);
  EXPECT_EQ(b->num_prompt_tokens, 7);
  EXPECT_GT(b->num_completion_tokens(), 5);
}

TEST(Scheduler, FinishedSequencesFreeTheirBlocksAndLeaveRunning) {
  SchedulerHarness h(small_config(8, 4, 100));
  Sequence* a = h.add(iota_tokens(5), long_generation(2));
  h.step();
  EXPECT_EQ(h.scheduler.block_manager().num_free_blocks(), 6);
  const std::vector<Sequence*> finished = h.step();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(a->status, SequenceStatus::kFinished);
  EXPECT_EQ(a->finish_reason, "length");
  EXPECT_TRUE(a->block_table.empty());
  EXPECT_TRUE(h.scheduler.running().empty());
  EXPECT_TRUE(h.scheduler.is_finished());
  EXPECT_EQ(h.scheduler.block_manager().num_free_blocks(), 8);
}

TEST(Scheduler, StopsOnEosUnlessIgnoringIt) {
  SchedulerHarness h(small_config(8, 4, 100));
  SamplingParams stops = long_generation(10);
  stops.ignore_eos = false;
  Sequence* stopping = h.add(iota_tokens(3), stops);
  Sequence* ignoring = h.add(iota_tokens(3, 20), long_generation(10));
  const std::vector<Sequence*> finished = h.step(/*token=*/0);  // 0 is the EOS id here
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0], stopping);
  EXPECT_EQ(stopping->finish_reason, "stop");
  EXPECT_EQ(stopping->completion_token_ids().back(), 0);
  EXPECT_EQ(ignoring->status, SequenceStatus::kRunning);
}

TEST(Scheduler, StopsOnStopTokenIds) {
  SchedulerHarness h(small_config(8, 4, 100));
  SamplingParams params = long_generation(10);
  params.stop_token_ids = {9, 42};
  Sequence* seq = h.add(iota_tokens(3), params);
  EXPECT_TRUE(h.step(5).empty());
  EXPECT_EQ(h.step(42).size(), 1u);
  EXPECT_EQ(seq->finish_reason, "stop");
  EXPECT_EQ(seq->num_completion_tokens(), 2);
}

TEST(Scheduler, StopsAtMaxTokens) {
  SchedulerHarness h(small_config(8, 4, 100));
  Sequence* seq = h.add(iota_tokens(3), long_generation(3));
  EXPECT_TRUE(h.step().empty());
  EXPECT_TRUE(h.step().empty());
  EXPECT_EQ(h.step().size(), 1u);
  EXPECT_EQ(seq->finish_reason, "length");
  EXPECT_EQ(seq->num_completion_tokens(), 3);
}

TEST(Scheduler, StopsAtMaxModelLen) {
  SchedulerConfig config = small_config(8, 4, 100);
  config.max_model_len = 10;
  SchedulerHarness h(config);
  Sequence* seq = h.add(iota_tokens(8));
  EXPECT_TRUE(h.step().empty());
  EXPECT_EQ(h.step().size(), 1u);
  EXPECT_EQ(seq->finish_reason, "length");
  EXPECT_EQ(seq->num_tokens(), 10);
}

TEST(Scheduler, MaxModelLenLimitedToWhatTheKVCacheHolds) {
  SchedulerHarness h(small_config(/*num_blocks=*/3, 4, 100));
  EXPECT_EQ(h.scheduler.max_model_len(), 12);
  EXPECT_THROW(h.add(iota_tokens(13)), Error);
}

TEST(Scheduler, PrefixHitsShortenThePrefill) {
  SchedulerHarness h(small_config(16, 4, 100));
  h.add(iota_tokens(12), long_generation(1));
  h.step();
  std::vector<int> prompt = iota_tokens(8);
  prompt.insert(prompt.end(), {70, 71, 72});
  Sequence* b = h.add(prompt);
  const ScheduledBatch batch = h.schedule();
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(b->num_cached_tokens, 8);
  EXPECT_EQ(batch.seqs[0].num_new_tokens, 3);
  EXPECT_EQ(h.scheduler.stats().num_prefix_hit_tokens, 8);
}

TEST(Scheduler, DecodeKeepsRunningOrder) {
  SchedulerHarness h(small_config(32, 4, 100));
  for (int i = 0; i < 4; ++i) h.add(iota_tokens(3, 10 * i));
  h.step();
  for (int step = 0; step < 3; ++step) {
    const ScheduledBatch batch = h.schedule();
    ASSERT_EQ(batch.seqs.size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(batch.seqs[i].seq->id, i);
    h.complete(batch);
  }
}

// Decode planned ahead of the samples (schedule_ahead): the step after a started decode step.
TEST(Scheduler, PlansTheNextDecodeAheadOfItsSamples) {
  SchedulerHarness h(small_config(32, 4, 100));
  Sequence* a = h.add(iota_tokens(3));
  Sequence* b = h.add(iota_tokens(4, 20));
  h.step();  // prefill: a has 4 tokens, b 5
  const ScheduledBatch started = h.schedule();
  ASSERT_FALSE(started.is_prefill);
  const ScheduledBatch* next = h.scheduler.schedule_ahead(started);
  ASSERT_NE(next, nullptr);
  const ScheduledBatch ahead = *next;
  h.check();
  ASSERT_EQ(ahead.seqs.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ahead.seqs[i].seq, started.seqs[i].seq);
    EXPECT_EQ(ahead.seqs[i].input_row, i);
    EXPECT_EQ(ahead.seqs[i].num_new_tokens, 1);
    EXPECT_TRUE(ahead.seqs[i].samples);
  }
  // a reaches position 4 ahead: a second block of 4 was taken for it; b's 6 tokens fit in 2.
  EXPECT_EQ(a->block_table.size(), 2u);
  EXPECT_EQ(b->block_table.size(), 2u);
  h.complete(started, 8);
  h.complete(ahead, 9);
  EXPECT_EQ(a->token_ids, (std::vector<int>{1, 2, 3, 7, 8, 9}));
  EXPECT_EQ(a->num_cached_tokens, 5);
  // From here the plain schedule goes on as if nothing had been planned ahead.
  const ScheduledBatch plain = h.schedule();
  ASSERT_EQ(plain.seqs.size(), 2u);
  EXPECT_EQ(plain.seqs[0].input_row, -1);
  h.complete(plain);
  EXPECT_EQ(a->num_tokens(), 7);
}

TEST(Scheduler, PlansNothingAheadWhileSequencesWait) {
  SchedulerHarness h(small_config(32, 4, 100));
  h.add(iota_tokens(3));
  h.step();
  const ScheduledBatch started = h.schedule();
  h.add(iota_tokens(3, 40));  // waiting: its prefill comes first
  EXPECT_EQ(h.scheduler.schedule_ahead(started), nullptr);
  h.complete(started);
  EXPECT_TRUE(h.schedule().is_prefill);
  // Prefill batches are never planned ahead.
  SchedulerHarness p(small_config(32, 4, 100));
  p.add(iota_tokens(3));
  EXPECT_EQ(p.scheduler.schedule_ahead(p.schedule()), nullptr);
}

TEST(Scheduler, LeavesOutOfTheStepAheadSequencesTheirNextTokenEnds) {
  SchedulerHarness h(small_config(32, 4, 100));
  h.add(iota_tokens(3), long_generation(2));  // its decode token is its last
  Sequence* longer = h.add(iota_tokens(3, 20), long_generation(10));
  h.step();
  const ScheduledBatch started = h.schedule();
  const ScheduledBatch* ahead = h.scheduler.schedule_ahead(started);
  ASSERT_NE(ahead, nullptr);
  ASSERT_EQ(ahead->seqs.size(), 1u);
  EXPECT_EQ(ahead->seqs[0].seq, longer);
  EXPECT_EQ(ahead->seqs[0].input_row, 1);
  const ScheduledBatch kept = *ahead;
  EXPECT_EQ(h.complete(started).size(), 1u);  // the first one ends by length
  h.complete(kept);
  EXPECT_EQ(longer->num_completion_tokens(), 3);
  // When every sequence ends, nothing is planned.
  SchedulerHarness last(small_config(32, 4, 100));
  last.add(iota_tokens(3), long_generation(2));
  last.step();
  EXPECT_EQ(last.scheduler.schedule_ahead(last.schedule()), nullptr);
}

TEST(Scheduler, PlansNothingAheadThatWouldNeedAPreemption) {
  // 2 blocks of 4: each sequence holds one, and position 4 ahead needs a third.
  SchedulerHarness h(small_config(2, 4, 100));
  Sequence* a = h.add(iota_tokens(2));
  h.add(iota_tokens(2, 20));
  h.step();                                     // 3 tokens each
  const ScheduledBatch started = h.schedule();  // position 2
  h.complete(started);
  const ScheduledBatch second = h.schedule();  // position 3, still in block 0
  EXPECT_EQ(h.scheduler.schedule_ahead(second), nullptr);
  EXPECT_EQ(a->block_table.size(), 1u);
  h.check();
}

TEST(Scheduler, PostprocessSkipsEntriesDroppedFromAStepPlannedAhead) {
  SchedulerHarness h(small_config(32, 4, 100));
  SamplingParams stops_on_eos = long_generation();
  stops_on_eos.ignore_eos = false;
  Sequence* a = h.add(iota_tokens(3), stops_on_eos);
  Sequence* b = h.add(iota_tokens(3, 20));
  h.step();
  const ScheduledBatch started = h.schedule();
  ScheduledBatch ahead = *h.scheduler.schedule_ahead(started);
  // a stops on EOS in the started step: the engine drops it from the step planned ahead.
  std::vector<SampleResult> samples(2);
  samples[0].token_id = 0;  // EOS
  samples[1].token_id = 5;
  const std::vector<Sequence*> finished = h.scheduler.postprocess(started, samples);
  ASSERT_EQ(finished, std::vector<Sequence*>{a});
  ahead.seqs[0].seq = nullptr;
  EXPECT_TRUE(h.complete(ahead, 6).empty());
  EXPECT_EQ(b->token_ids.back(), 6);
  EXPECT_EQ(b->num_cached_tokens, 5);
}

}  // namespace
}  // namespace nanovllm
