// Continuous batching: which sequences run in the next step, and what happens after it.
//
// Prefill goes first: the sequence at the head of `waiting` continues (or starts) its prompt,
// then more waiting sequences join while max_num_seqs, max_num_batched_tokens and free blocks
// allow. A prompt longer than the token budget is prefilled in chunks over several steps; it
// holds blocks for all its tokens and stays at the head of `waiting` until its last chunk is
// scheduled. Otherwise every running sequence decodes one token, and when a block cannot be
// had the sequence at the tail of `running` is preempted: its blocks are freed and it goes to
// the head of `waiting`, to be recomputed (from whatever the prefix cache still holds).
// Prefill and decode are not mixed in one step, as in nano-vllm.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/block_manager.h"
#include "engine/model_executor.h"
#include "engine/sequence.h"
#include "engine/stop_checker.h"

namespace nanovllm {

struct SchedulerConfig {
  int max_num_seqs = 512;
  int max_num_batched_tokens = 16384;
  int num_kvcache_blocks = 0;
  int block_size = 256;
  bool enable_prefix_caching = true;
  std::vector<int> eos_token_ids;
  int max_model_len = 4096;  // further limited to what the KV cache can hold
};

struct SchedulerStats {
  int64_t num_preemptions = 0;
  int64_t num_prefix_hit_tokens = 0;  // prompt tokens found in the cache on admission
  int64_t num_partial_prefills = 0;   // prefill entries that did not reach the end of a prompt
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // The longest a sequence may get: max_model_len, but never more than the KV cache holds, so
  // that a sequence running alone always fits.
  int max_model_len() const { return stop_.max_model_len; }

  // Queues `seq` (owned by the caller, alive until it finishes). Its prompt must be at most
  // max_model_len() tokens.
  void add(Sequence* seq);
  bool is_finished() const { return waiting_.empty() && running_.empty(); }

  // The next step's batch (valid until the next call). Empty only when nothing can run.
  const ScheduledBatch& schedule();

  // After `batch` ran: advances cached-token counts, publishes the blocks it completed, appends
  // the sampled tokens (one per entry with `samples`, in order) and finishes sequences that
  // stop, freeing their blocks. Returns the finished sequences in batch order.
  std::vector<Sequence*> postprocess(const ScheduledBatch& batch,
                                     const std::vector<SampleResult>& samples);

  // Takes every waiting and running sequence out of the queues, freeing their blocks; returns
  // them marked finished, waiting ones first.
  std::vector<Sequence*> abort_all();

  const BlockManager& block_manager() const { return block_manager_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::deque<Sequence*>& running() const { return running_; }
  // Every queued sequence (waiting and running), for consistency checks.
  std::vector<const Sequence*> sequences() const;
  const SchedulerStats& stats() const { return stats_; }

 private:
  void schedule_prefill();
  void schedule_decode();
  void preempt(Sequence* seq);

  int max_num_seqs_;
  int max_num_batched_tokens_;
  StopConditions stop_;
  BlockManager block_manager_;
  std::deque<Sequence*> waiting_;
  std::deque<Sequence*> running_;
  ScheduledBatch batch_;
  SchedulerStats stats_;
};

}  // namespace nanovllm
