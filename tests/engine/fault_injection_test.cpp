// One request's trouble never costs another request its output. Faults are injected into a few
// sequences at random points of random workloads (their detokenizer throws, their logits turn
// NaN, the KV blocks they ask for are refused): each such request fails alone with an error
// naming the fault, every other output is identical to the run without faults, the pool's
// invariants hold after every step, and every block and request comes back at the end.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "engine_harness.h"

namespace nanovllm {
namespace {

using namespace nanovllm::testing;

enum class FaultKind { kDecoderThrows, kNanLogits, kAllocationRefused };

struct FaultKindInfo {
  const char* name;
  const char* message;  // what the failed request's error must mention
};

// Indexed by FaultKind.
constexpr FaultKindInfo kFaultKinds[] = {
    {"decoder throws", "injected decoder fault"},
    {"NaN logits", "NaN"},
    {"allocation refused", "KV cache allocation failed: injected allocation fault"},
};

const FaultKindInfo& info(FaultKind kind) {
  return kFaultKinds[static_cast<int>(kind)];
}

// The victim's `trigger`-th event of its kind (decoded token, sampled row, block allocation)
// fails.
struct Fault {
  FaultKind kind;
  size_t victim;  // request index (= request id: every run uses a fresh engine)
  int trigger;    // 1-based
};

// How often each request met each kind of event, counted in the run without faults.
using EventCounts = std::map<std::pair<size_t, FaultKind>, int>;

// Counts a request's events of one kind and says when the injected fault is due.
class FaultPlan {
 public:
  explicit FaultPlan(std::vector<Fault> faults) : faults_(std::move(faults)) {}

  // Records an event; true when it is the one that must fail.
  bool event(size_t request, FaultKind kind) {
    const int count = ++counts_[{request, kind}];
    for (const Fault& fault : faults_) {
      if (fault.victim == request && fault.kind == kind && fault.trigger == count) return true;
    }
    return false;
  }
  const EventCounts& counts() const { return counts_; }

 private:
  std::vector<Fault> faults_;
  EventCounts counts_;
};

// LetterDecoder that throws when the plan says so.
class FaultyLetterDecoder final : public TokenTextDecoder {
 public:
  FaultyLetterDecoder(FaultPlan& plan, size_t request) : plan_(plan), request_(request) {}
  std::string push(int token_id) override {
    if (plan_.event(request_, FaultKind::kDecoderThrows)) throw Error("injected decoder fault");
    return letter_of(token_id);
  }

 private:
  FaultPlan& plan_;
  size_t request_;
};

struct RunResult {
  std::vector<RequestOutput> outputs;
  EventCounts events;
};

// Runs the workload with requests arriving in bursts drawn from `arrival_seed`, the pool checked
// after every step, and the plan's faults injected.
RunResult run_with_faults(const EngineSetup& setup, const Workload& workload, uint64_t arrival_seed,
                          FaultPlan& plan) {
  auto decoders_made = std::make_shared<size_t>(0);
  FakeEngine fake = make_fake_engine(setup, [&plan, decoders_made](std::span<const int>) {
    // Decoders are made in add_request order, so the n-th one is request n's.
    return std::make_unique<FaultyLetterDecoder>(plan, (*decoders_made)++);
  });
  LLMEngine& engine = *fake.engine;
  fake.executor->faults().on_logits = [&plan](const Sequence& seq, std::vector<float>& logits) {
    if (plan.event(static_cast<size_t>(seq.id), FaultKind::kNanLogits)) {
      std::fill(logits.begin(), logits.end(), std::numeric_limits<float>::quiet_NaN());
    }
  };
  engine.set_allocation_hook([&plan](const Sequence& seq) {
    if (plan.event(static_cast<size_t>(seq.id), FaultKind::kAllocationRefused)) {
      throw Error("injected allocation fault");
    }
  });

  std::mt19937_64 gen(arrival_seed);
  RunResult result;
  result.outputs.resize(workload.prompts.size());
  std::vector<bool> seen(workload.prompts.size(), false);
  size_t next = 0;
  for (int steps = 0; next < workload.prompts.size() || !engine.is_finished(); ++steps) {
    EXPECT_LT(steps, 100000) << "no progress";
    if (steps >= 100000) break;
    for (int burst = std::uniform_int_distribution<int>(0, 6)(gen);
         burst > 0 && next < workload.prompts.size(); --burst, ++next) {
      EXPECT_EQ(engine.add_request(workload.prompts[next], workload.params[next]),
                static_cast<int64_t>(next));
    }
    for (RequestOutput& output : engine.step().finished) {
      const size_t index = static_cast<size_t>(output.request_id);
      EXPECT_FALSE(seen[index]) << "request " << index << " reported twice";
      seen[index] = true;
      result.outputs[index] = std::move(output);
    }
    const Scheduler& scheduler = engine.scheduler();
    EXPECT_NO_THROW(scheduler.block_manager().check_consistency(scheduler.sequences()));
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), static_cast<long>(seen.size()));
  EXPECT_EQ(engine.num_unfinished(), 0u);
  expect_pool_empty(engine);
  result.events = plan.counts();
  return result;
}

// Text each output must carry: one letter per generated token (LetterDecoder).
void expect_letter_text(const RequestOutput& output, size_t index) {
  std::string letters;
  for (int token : output.token_ids) letters += letter_of(token);
  EXPECT_EQ(output.text, letters) << "request " << index;
}

class FaultInjection : public ::testing::TestWithParam<uint64_t> {};

TEST_P(FaultInjection, FaultedRequestsFailAloneAndTheOthersAreUnchanged) {
  const uint64_t seed = GetParam();
  std::mt19937_64 gen(seed);
  const auto uniform = [&gen](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(gen);
  };
  // Small pools: preemption and recomputation around the faults.
  const EngineSetup setup = random_small_setup(gen);
  const Workload workload = make_workload(seed * 7919 + 5, 60, setup.vocab_size, 30, 30, 30);
  const uint64_t arrival_seed = gen();

  FaultPlan no_faults({});
  const RunResult clean = run_with_faults(setup, workload, arrival_seed, no_faults);
  for (size_t i = 0; i < clean.outputs.size(); ++i) {
    if (clean.outputs[i].ok()) expect_letter_text(clean.outputs[i], i);
  }

  // One to three victims, each with a fault at a random event it does reach; the kinds take
  // turns so that every seed range covers all three.
  std::vector<Fault> faults;
  const int num_victims = uniform(1, 3);
  for (int attempt = 0; attempt < 1000 && static_cast<int>(faults.size()) < num_victims;
       ++attempt) {
    const size_t victim =
        static_cast<size_t>(uniform(0, static_cast<int>(workload.prompts.size()) - 1));
    const FaultKind kind = static_cast<FaultKind>((seed + faults.size()) % 3);
    const auto count = clean.events.find({victim, kind});
    const bool taken = std::any_of(faults.begin(), faults.end(),
                                   [victim](const Fault& f) { return f.victim == victim; });
    if (taken || !clean.outputs[victim].ok() || count == clean.events.end()) continue;
    faults.push_back({kind, victim, uniform(1, count->second)});
  }
  ASSERT_FALSE(faults.empty());

  FaultPlan plan(faults);
  const RunResult faulty = run_with_faults(setup, workload, arrival_seed, plan);
  std::vector<bool> is_victim(workload.prompts.size(), false);
  for (const Fault& fault : faults) {
    SCOPED_TRACE(::testing::Message() << "request " << fault.victim << ": " << info(fault.kind).name
                                      << " at event " << fault.trigger);
    is_victim[fault.victim] = true;
    const RequestOutput& output = faulty.outputs[fault.victim];
    EXPECT_EQ(output.request_id, static_cast<int64_t>(fault.victim));
    EXPECT_NE(output.error.find(info(fault.kind).message), std::string::npos) << output.error;
    EXPECT_TRUE(output.finish_reason.empty());
  }
  for (size_t i = 0; i < workload.prompts.size(); ++i) {
    if (!is_victim[i]) expect_same_output(faulty.outputs[i], clean.outputs[i], i);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, FaultInjection, ::testing::Range<uint64_t>(1, 41),
                         [](const ::testing::TestParamInfo<uint64_t>& info) {
                           return "seed" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace nanovllm
