#include "engine/scheduler.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "core/check.h"

namespace nanovllm {

Scheduler::Scheduler(const SchedulerConfig& config)
    : max_num_seqs_(config.max_num_seqs),
      max_num_batched_tokens_(config.max_num_batched_tokens),
      block_manager_(config.num_kvcache_blocks, config.block_size, config.enable_prefix_caching) {
  NVLLM_CHECK_GT(max_num_seqs_, 0);
  NVLLM_CHECK_GT(max_num_batched_tokens_, 0);
  NVLLM_CHECK_GT(config.max_model_len, 0);
  stop_.eos_token_ids = config.eos_token_ids;
  const int64_t capacity =
      static_cast<int64_t>(config.num_kvcache_blocks) * static_cast<int64_t>(config.block_size);
  stop_.max_model_len = static_cast<int>(std::min<int64_t>(config.max_model_len, capacity));
}

void Scheduler::add(Sequence* seq) {
  NVLLM_CHECK(seq != nullptr);
  NVLLM_CHECK_MSG(seq->status == SequenceStatus::kWaiting && seq->block_table.empty(),
                  "sequence {} is not a new request", seq->id);
  NVLLM_CHECK_MSG(seq->num_tokens() <= max_model_len(),
                  "sequence {} has {} tokens, more than max_model_len {}", seq->id,
                  seq->num_tokens(), max_model_len());
  waiting_.push_back(seq);
}

std::vector<const Sequence*> Scheduler::sequences() const {
  std::vector<const Sequence*> all(waiting_.begin(), waiting_.end());
  all.insert(all.end(), running_.begin(), running_.end());
  return all;
}

const ScheduledBatch& Scheduler::schedule() {
  batch_.seqs.clear();
  schedule_prefill();
  if (!batch_.empty()) {
    batch_.is_prefill = true;
    return batch_;
  }
  batch_.is_prefill = false;
  schedule_decode();
  return batch_;
}

void Scheduler::schedule_prefill() {
  int budget = max_num_batched_tokens_;
  while (!waiting_.empty() && budget > 0) {
    Sequence* seq = waiting_.front();
    // A prompt in the middle of a chunked prefill holds its blocks and always continues.
    if (seq->block_table.empty()) {
      // Sequences admitted earlier in this loop are already in `running`.
      if (running_.size() >= static_cast<size_t>(max_num_seqs_)) break;
      try {
        if (!block_manager_.can_allocate(*seq)) break;
        block_manager_.allocate(*seq);
      } catch (const std::exception& error) {
        waiting_.pop_front();
        fail(*seq, fmt::format("KV cache allocation failed: {}", error.what()));
        failed_.push_back(seq);
        continue;
      }
      stats_.num_prefix_hit_tokens += seq->num_cached_tokens;
      stats_.num_prefix_query_tokens += seq->num_tokens();
    }
    const int remaining = seq->num_tokens() - seq->num_cached_tokens;
    NVLLM_CHECK_GT(remaining, 0);
    const int num_new_tokens = std::min(remaining, budget);
    budget -= num_new_tokens;
    const bool reaches_end = num_new_tokens == remaining;
    batch_.seqs.push_back({seq, num_new_tokens, reaches_end});
    if (!reaches_end) {
      ++stats_.num_partial_prefills;
      break;  // the budget is spent; the rest of this prompt runs next step
    }
    waiting_.pop_front();
    seq->status = SequenceStatus::kRunning;
    running_.push_back(seq);
  }
}

void Scheduler::schedule_decode() {
  while (!running_.empty() && batch_.seqs.size() < static_cast<size_t>(max_num_seqs_)) {
    Sequence* seq = running_.front();
    running_.pop_front();
    bool has_slot = true;
    while (!block_manager_.can_append(*seq)) {
      if (!running_.empty()) {
        Sequence* victim = running_.back();
        running_.pop_back();
        preempt(victim);
      } else {
        // Nobody left to make room for it: it waits (and is recomputed) instead.
        preempt(seq);
        has_slot = false;
        break;
      }
    }
    if (!has_slot) continue;
    try {
      block_manager_.may_append(*seq);
    } catch (const std::exception& error) {
      fail(*seq, fmt::format("KV cache allocation failed: {}", error.what()));
      failed_.push_back(seq);
      continue;
    }
    NVLLM_CHECK_EQ(seq->num_tokens() - seq->num_cached_tokens, 1);
    batch_.seqs.push_back({seq, 1, true});
  }
  // Scheduled sequences go back to the head of `running`, in their order.
  for (auto it = batch_.seqs.rbegin(); it != batch_.seqs.rend(); ++it) running_.push_front(it->seq);
}

const ScheduledBatch* Scheduler::schedule_ahead(const ScheduledBatch& batch) {
  if (!waiting_.empty() || batch.is_prefill || running_.size() != batch.seqs.size()) {
    return nullptr;
  }
  ahead_.is_prefill = false;
  ahead_.seqs.clear();
  int new_blocks = 0;
  for (size_t row = 0; row < batch.seqs.size(); ++row) {
    const ScheduledSequence& entry = batch.seqs[row];
    Sequence* seq = entry.seq;
    if (seq == nullptr || seq != running_[row] || !entry.samples || entry.num_new_tokens != 1) {
      return nullptr;
    }
    // With the sample `batch` appends, would it stop by length?
    const int tokens = seq->num_tokens() + 1;
    if (tokens - seq->num_prompt_tokens >= seq->params.max_tokens ||
        tokens >= stop_.max_model_len) {
      continue;
    }
    if (!block_manager_.can_append(*seq, 1)) return nullptr;
    if (static_cast<int>(seq->block_table.size()) * block_manager_.block_size() < tokens) {
      ++new_blocks;
    }
    ahead_.seqs.push_back({seq, 1, true, static_cast<int>(row)});
  }
  if (ahead_.seqs.empty() || new_blocks > block_manager_.num_free_blocks()) return nullptr;
  try {
    for (const ScheduledSequence& entry : ahead_.seqs) block_manager_.may_append(*entry.seq, 1);
  } catch (const std::exception&) {
    // schedule() meets the same trouble next and fails that sequence alone; blocks taken
    // here are the ones it would take.
    return nullptr;
  }
  return &ahead_;
}

void Scheduler::preempt(Sequence* seq) {
  seq->status = SequenceStatus::kWaiting;
  block_manager_.deallocate(*seq);  // also resets its cached-token count
  waiting_.push_front(seq);
  ++stats_.num_preemptions;
}

std::vector<Sequence*> Scheduler::take_failed() {
  return std::exchange(failed_, {});
}

void Scheduler::fail(Sequence& seq, std::string reason) {
  seq.error = std::move(reason);
  seq.status = SequenceStatus::kFinished;
  block_manager_.deallocate(seq);
}

std::vector<Sequence*> Scheduler::abort_all(const std::string& reason) {
  std::vector<Sequence*> ended = take_failed();  // they keep their own error
  const size_t first_queued = ended.size();
  ended.insert(ended.end(), running_.begin(), running_.end());
  ended.insert(ended.end(), waiting_.begin(), waiting_.end());
  running_.clear();
  waiting_.clear();
  for (size_t i = first_queued; i < ended.size(); ++i) fail(*ended[i], reason);
  return ended;
}

bool Scheduler::abort(Sequence* seq, const std::string& reason) {
  if (std::erase(failed_, seq) > 0) return true;
  for (std::deque<Sequence*>* queue : {&running_, &waiting_}) {
    const auto it = std::find(queue->begin(), queue->end(), seq);
    if (it == queue->end()) continue;
    queue->erase(it);
    fail(*seq, reason);
    return true;
  }
  return false;
}

bool Scheduler::append_sample(Sequence& seq, const SampleResult& sample) {
  if (!sample.error.empty()) throw Error(sample.error);
  NVLLM_CHECK_EQ(seq.num_cached_tokens, seq.num_tokens());
  return append_token_and_check_stop(seq, sample, stop_);
}

std::vector<Sequence*> Scheduler::postprocess(const ScheduledBatch& batch,
                                              const std::vector<SampleResult>& samples) {
  std::vector<Sequence*> finished;
  bool any_failed = false;
  size_t next_sample = 0;
  for (const ScheduledSequence& entry : batch.seqs) {
    const SampleResult* sample = nullptr;
    if (entry.samples) {
      NVLLM_CHECK_MSG(next_sample < samples.size(), "{} samples for a batch sampling {}",
                      samples.size(), batch.num_sampling());
      sample = &samples[next_sample++];
    }
    if (entry.seq == nullptr) continue;  // dropped: it ended before this step ran
    Sequence& seq = *entry.seq;
    try {
      seq.num_cached_tokens += entry.num_new_tokens;
      NVLLM_CHECK_LE(seq.num_cached_tokens, seq.num_tokens());
      // Their K/V is written now, so the completed blocks may be shared from here on.
      block_manager_.publish_computed_blocks(seq);
      if (sample == nullptr || !append_sample(seq, *sample)) continue;
      seq.status = SequenceStatus::kFinished;
      block_manager_.deallocate(seq);
    } catch (const std::exception& error) {
      fail(seq, error.what());
      any_failed = true;
    }
    finished.push_back(&seq);
  }
  NVLLM_CHECK_EQ(next_sample, samples.size());
  const auto is_finished = [](const Sequence* seq) {
    return seq->status == SequenceStatus::kFinished;
  };
  if (!finished.empty()) std::erase_if(running_, is_finished);
  // A prompt chunk that failed is still at the head of `waiting`.
  if (any_failed) std::erase_if(waiting_, is_finished);
  return finished;
}

}  // namespace nanovllm
