// LLMEngine end to end over the fake executor: outputs equal to running each request alone,
// whatever the caching, preemption, chunking, block size or arrival order.
#include "engine/llm_engine.h"

#include <gtest/gtest.h>

#include <map>

#include "core/check.h"
#include "engine_harness.h"

namespace nanovllm {
namespace {

using namespace nanovllm::testing;

constexpr int kRequests = 40;

std::vector<RequestOutput> run(const EngineSetup& setup, const Workload& workload) {
  FakeEngine fake = make_fake_engine(setup);
  std::vector<RequestOutput> outputs =
      fake.engine->generate(workload.prompts, workload.params, /*use_progress=*/false);
  expect_pool_empty(*fake.engine);
  return outputs;
}

TEST(LLMEngine, OutputsEqualEachRequestRunAlone) {
  const EngineSetup setup;
  const Workload workload = make_workload(1, kRequests, setup.vocab_size);
  expect_same_outputs(run(setup, workload),
                      reference_outputs(workload, setup.max_model_len, setup.vocab_size));
}

TEST(LLMEngine, OutputsIdenticalWithPrefixCachingOnAndOff) {
  EngineSetup on;
  on.max_num_seqs = 8;  // later requests arrive after earlier prefixes are computed
  EngineSetup off = on;
  off.prefix_caching = false;
  const Workload workload = make_workload(2, kRequests, on.vocab_size);
  FakeEngine cached = make_fake_engine(on);
  const std::vector<RequestOutput> with_cache =
      cached.engine->generate(workload.prompts, workload.params, false);
  EXPECT_GT(cached.engine->scheduler().stats().num_prefix_hit_tokens, 0);
  expect_same_outputs(with_cache, run(off, workload));
  expect_same_outputs(with_cache, reference_outputs(workload, on.max_model_len, on.vocab_size));
}

TEST(LLMEngine, OutputsIdenticalUnderForcedPreemption) {
  EngineSetup tiny;
  tiny.num_blocks = 16;  // 64 tokens: one long sequence fits, many at once do not
  const Workload workload = make_workload(3, kRequests, tiny.vocab_size);
  FakeEngine fake = make_fake_engine(tiny);
  const std::vector<RequestOutput> outputs =
      fake.engine->generate(workload.prompts, workload.params, false);
  EXPECT_GT(fake.engine->scheduler().stats().num_preemptions, 0);
  expect_pool_empty(*fake.engine);
  expect_same_outputs(outputs, run(EngineSetup{}, workload));
}

// Decode steps planned ahead of their samples (the default) against steps planned after them:
// the same tokens, stop reasons and texts, with sequences stopping by EOS, stop tokens, stop
// strings and length, mid-stream arrivals and preemption on the way.
TEST(LLMEngine, OutputsIdenticalWithAndWithoutAsyncScheduling) {
  for (int num_blocks : {1024, 16}) {
    SCOPED_TRACE(::testing::Message() << num_blocks << " blocks");
    EngineSetup ahead;
    ahead.num_blocks = num_blocks;
    EngineSetup after = ahead;
    after.async_scheduling = false;
    Workload workload = make_workload(11, kRequests, ahead.vocab_size);
    for (size_t i = 0; i < workload.params.size(); ++i) {
      SamplingParams& params = workload.params[i];
      params.logprobs.reset();  // a batch with logprobs is not planned ahead
      if (i % 3 == 0) params.stop = {"q"};
      if (i % 5 == 0) params.stop_token_ids = {7};
    }
    FakeEngine planned = make_fake_engine(ahead, letter_decoders());
    const std::vector<RequestOutput> outputs =
        planned.engine->generate(workload.prompts, workload.params, false);
    expect_pool_empty(*planned.engine);
    FakeEngine waited = make_fake_engine(after, letter_decoders());
    const std::vector<RequestOutput> reference =
        waited.engine->generate(workload.prompts, workload.params, false);
    expect_same_outputs(outputs, reference);
    for (size_t i = 0; i < outputs.size(); ++i) EXPECT_EQ(outputs[i].text, reference[i].text);
    // Planning ahead ran decode steps whose rows name the step before's samples.
    const auto ahead_rows = [](const FakeEngine& fake) {
      int rows = 0;
      for (const RecordedStep& step : fake.executor->steps()) {
        for (const RecordedEntry& entry : step.entries) rows += entry.ahead ? 1 : 0;
      }
      return rows;
    };
    EXPECT_GT(ahead_rows(planned), 0);
    EXPECT_EQ(ahead_rows(waited), 0);
  }
}

TEST(LLMEngine, OutputsIdenticalWithChunkedPrefill) {
  EngineSetup chunked;
  chunked.max_num_batched_tokens = 5;
  const Workload workload = make_workload(4, kRequests, chunked.vocab_size);
  FakeEngine fake = make_fake_engine(chunked);
  const std::vector<RequestOutput> outputs =
      fake.engine->generate(workload.prompts, workload.params, false);
  EXPECT_GT(fake.engine->scheduler().stats().num_partial_prefills, 0);
  for (const RecordedStep& step : fake.executor->steps()) {
    int tokens = 0;
    for (const RecordedEntry& entry : step.entries) tokens += entry.num_new_tokens;
    if (step.is_prefill) {
      EXPECT_LE(tokens, 5);
    }
  }
  expect_same_outputs(outputs, run(EngineSetup{}, workload));
}

TEST(LLMEngine, OutputsIdenticalAcrossBlockSizes) {
  const Workload workload = make_workload(5, kRequests, 64);
  const std::vector<RequestOutput> baseline = run(EngineSetup{}, workload);
  for (int block_size : {1, 2, 3, 8, 16}) {
    SCOPED_TRACE(::testing::Message() << "block size " << block_size);
    EngineSetup setup;
    setup.block_size = block_size;
    setup.num_blocks = 4096 / block_size;
    expect_same_outputs(run(setup, workload), baseline);
  }
}

TEST(LLMEngine, OutputsIdenticalWithFewSequencesAtOnce) {
  EngineSetup narrow;
  narrow.max_num_seqs = 2;
  const Workload workload = make_workload(6, kRequests, narrow.vocab_size);
  expect_same_outputs(run(narrow, workload), run(EngineSetup{}, workload));
}

TEST(LLMEngine, OutputsIdenticalWhenRequestsArriveOneByOne) {
  EngineSetup setup;
  setup.num_blocks = 24;  // some preemption as well
  const Workload workload = make_workload(7, kRequests, setup.vocab_size);
  FakeEngine fake = make_fake_engine(setup);
  std::map<int64_t, RequestOutput> by_id;
  std::vector<int64_t> ids;
  for (size_t i = 0; i < workload.prompts.size(); ++i) {
    ids.push_back(fake.engine->add_request(workload.prompts[i], workload.params[i]));
    for (int s = 0; s < static_cast<int>(i % 3); ++s) {
      for (RequestOutput& output : fake.engine->step().finished) by_id[output.request_id] = output;
      check_pool(*fake.engine);
    }
  }
  while (!fake.engine->is_finished()) {
    for (RequestOutput& output : fake.engine->step().finished) by_id[output.request_id] = output;
    check_pool(*fake.engine);
  }
  std::vector<RequestOutput> outputs;
  for (int64_t id : ids) outputs.push_back(by_id.at(id));
  expect_pool_empty(*fake.engine);
  expect_same_outputs(outputs, run(EngineSetup{}, workload));
}

TEST(LLMEngine, GenerateReturnsOutputsInInputOrder) {
  const Workload workload = make_workload(8, 10, 64);
  FakeEngine fake = make_fake_engine(EngineSetup{});
  const std::vector<RequestOutput> outputs =
      fake.engine->generate(workload.prompts, workload.params, false);
  ASSERT_EQ(outputs.size(), workload.prompts.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_EQ(outputs[i].prompt_token_ids, workload.prompts[i]);
    EXPECT_EQ(outputs[i].request_id, static_cast<int64_t>(i));
  }
}

TEST(LLMEngine, OneSamplingParamsForAllPrompts) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 5;
  const std::vector<std::vector<int>> prompts = {{1, 2, 3}, {4, 5}, {6}};
  FakeEngine fake = make_fake_engine(EngineSetup{});
  const std::vector<RequestOutput> outputs = fake.engine->generate(prompts, greedy, false);
  for (size_t i = 0; i < prompts.size(); ++i) {
    expect_same_output(outputs[i], reference_generate(prompts[i], greedy, kEosTokenIds, 4096, 64),
                       i);
  }
}

TEST(LLMEngine, GenerateRejectsMismatchedParamsCount) {
  FakeEngine fake = make_fake_engine(EngineSetup{});
  const std::vector<std::vector<int>> prompts = {{1}, {2}, {3}};
  EXPECT_THROW(fake.engine->generate(prompts, std::vector<SamplingParams>(2), false), Error);
}

TEST(LLMEngine, GenerateNeedsAnIdleEngine) {
  FakeEngine fake = make_fake_engine(EngineSetup{});
  fake.engine->add_request({1, 2, 3}, SamplingParams{});
  EXPECT_THROW(fake.engine->generate({{4}}, SamplingParams{}, false), Error);
}

TEST(LLMEngine, EmptyGenerateReturnsNothing) {
  FakeEngine fake = make_fake_engine(EngineSetup{});
  EXPECT_TRUE(fake.engine->generate({}, SamplingParams{}, false).empty());
}

TEST(LLMEngine, UnseededRequestsFollowTheEngineSeed) {
  SamplingParams sampled;
  sampled.temperature = 1.0f;
  sampled.max_tokens = 16;
  sampled.ignore_eos = true;
  const std::vector<std::vector<int>> prompts = {{1, 2, 3}, {1, 2, 3}};
  EngineSetup setup;
  const auto generate = [&](uint64_t seed) {
    setup.seed = seed;
    return make_fake_engine(setup).engine->generate(prompts, sampled, false);
  };
  const std::vector<RequestOutput> first = generate(0);
  expect_same_outputs(generate(0), first);
  // The two identical prompts get different streams, and another engine seed changes them.
  EXPECT_NE(first[0].token_ids, first[1].token_ids);
  EXPECT_NE(generate(1)[0].token_ids, first[0].token_ids);
}

TEST(LLMEngine, SeededRequestIgnoresEngineSeedAndBatch) {
  SamplingParams sampled;
  sampled.temperature = 1.0f;
  sampled.max_tokens = 16;
  sampled.ignore_eos = true;
  sampled.seed = 42;
  EngineSetup setup;
  setup.seed = 7;
  const std::vector<RequestOutput> alone =
      make_fake_engine(setup).engine->generate({{5, 6, 7}}, sampled, false);
  setup.seed = 8;
  const Workload others = make_workload(9, 10, setup.vocab_size);
  std::vector<std::vector<int>> prompts = others.prompts;
  std::vector<SamplingParams> params = others.params;
  prompts.insert(prompts.begin() + 4, {5, 6, 7});
  params.insert(params.begin() + 4, sampled);
  const std::vector<RequestOutput> batched =
      make_fake_engine(setup).engine->generate(prompts, params, false);
  EXPECT_EQ(batched[4].token_ids, alone[0].token_ids);
}

TEST(LLMEngine, LogprobsReportedForEveryGeneratedToken) {
  SamplingParams params;
  params.temperature = 0.9f;
  params.seed = 3;
  params.max_tokens = 10;
  params.logprobs = 3;
  FakeEngine fake = make_fake_engine(EngineSetup{});
  const std::vector<RequestOutput> outputs = fake.engine->generate({{9, 8, 7}}, params, false);
  ASSERT_TRUE(outputs[0].logprobs.has_value());
  ASSERT_EQ(outputs[0].logprobs->size(), outputs[0].token_ids.size());
  for (size_t i = 0; i < outputs[0].token_ids.size(); ++i) {
    EXPECT_EQ((*outputs[0].logprobs)[i].token_id, outputs[0].token_ids[i]);
    EXPECT_EQ((*outputs[0].logprobs)[i].top.size(), 3u);
  }
  params.logprobs.reset();
  EXPECT_FALSE(make_fake_engine(EngineSetup{})
                   .engine->generate({{9, 8, 7}}, params, false)[0]
                   .logprobs.has_value());
}

TEST(LLMEngine, TextComesFromTheDecoder) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 12;
  greedy.ignore_eos = true;
  FakeEngine fake = make_fake_engine(EngineSetup{}, letter_decoders());
  const RequestOutput output = fake.engine->generate({{3, 4, 5}}, greedy, false)[0];
  std::string expected;
  for (int token : output.token_ids) expected += static_cast<char>('a' + token % 26);
  EXPECT_EQ(output.text, expected);
}

TEST(LLMEngine, StopStringCutsTextAndFinishesWithStop) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 20;
  greedy.ignore_eos = true;
  const std::vector<int> prompt = {3, 4, 5};
  const RequestOutput full = make_fake_engine(EngineSetup{}, letter_decoders())
                                 .engine->generate({prompt}, greedy, false)[0];
  ASSERT_EQ(full.text.size(), 20u);
  const std::string stop = full.text.substr(6, 3);
  const size_t cut = full.text.find(stop);
  greedy.stop = {stop};
  const RequestOutput stopped = make_fake_engine(EngineSetup{}, letter_decoders())
                                    .engine->generate({prompt}, greedy, false)[0];
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_EQ(stopped.text, full.text.substr(0, cut));
  // Generation ends with the token that completed the stop string.
  ASSERT_EQ(stopped.token_ids.size(), cut + stop.size());
  EXPECT_TRUE(
      std::equal(stopped.token_ids.begin(), stopped.token_ids.end(), full.token_ids.begin()));
}

TEST(LLMEngine, StepReportsPrefillAndDecodeTokens) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 3;
  greedy.ignore_eos = true;
  FakeEngine fake = make_fake_engine(EngineSetup{});
  fake.engine->add_request({1, 2, 3, 4}, greedy);
  fake.engine->add_request({5, 6}, greedy);
  StepResult first = fake.engine->step();
  EXPECT_EQ(first.num_prefill_tokens, 6);
  EXPECT_EQ(first.num_decode_tokens, 0);
  StepResult second = fake.engine->step();
  EXPECT_EQ(second.num_prefill_tokens, 0);
  EXPECT_EQ(second.num_decode_tokens, 2);
  StepResult third = fake.engine->step();
  EXPECT_EQ(third.finished.size(), 2u);
  EXPECT_TRUE(fake.engine->is_finished());
}

// A step planned ahead for sequences that then stop (here all of them, by EOS) still has to be
// finished; its rows count for nothing.
TEST(LLMEngine, StepPlannedAheadOfAStopIsFinishedAndCountsNothing) {
  SamplingParams stops;
  stops.temperature = 0.0f;
  stops.max_tokens = 50;
  FakeEngine fake = make_fake_engine(EngineSetup{});
  // A prompt whose greedy continuation is EOS after a few tokens, found by the reference.
  std::vector<int> prompt;
  for (int first = 1;; ++first) {
    prompt = {first, first + 1};
    const RequestOutput alone = reference_generate(prompt, stops, kEosTokenIds, 4096, 64);
    if (alone.finish_reason == "stop" && alone.token_ids.size() >= 2) break;
    ASSERT_LT(first, 10000);
  }
  fake.engine->add_request(prompt, stops);
  int decoded = 0;
  std::vector<RequestOutput> finished;
  while (!fake.engine->is_finished()) {
    StepResult result = fake.engine->step();
    decoded += result.num_decode_tokens;
    for (RequestOutput& output : result.finished) finished.push_back(std::move(output));
  }
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].finish_reason, "stop");
  // The prefill samples the first token; each decode step one more.
  EXPECT_EQ(decoded + 1, static_cast<int>(finished[0].token_ids.size()));
  expect_pool_empty(*fake.engine);
}

}  // namespace
}  // namespace nanovllm
