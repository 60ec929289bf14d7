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
//
// Trouble with one sequence (an allocation it cannot get, a sample it cannot have, its
// detokenizer or stop check throwing) fails that sequence alone: it ends with `error` set and its
// blocks are freed, and the others go on.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
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
  int64_t num_prefix_hit_tokens = 0;    // prompt tokens found in the cache on admission
  int64_t num_prefix_query_tokens = 0;  // tokens looked up in the cache on admission
  int64_t num_partial_prefills = 0;     // prefill entries that did not reach the end of a prompt
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
  // Sequences whose blocks could not be allocated fail; take_failed() returns them.
  const ScheduledBatch& schedule();
  // The sequences that failed in schedule() since the last call.
  std::vector<Sequence*> take_failed();

  // The decode step after `batch` (a decode step started but not yet postprocessed), planned
  // before its samples are known, so the device can start it while the host waits for them:
  // every running sequence decodes the token `batch` is sampling for it (input_row: its row
  // there), except those that token ends by length. Takes the blocks that needs. Null when
  // it cannot be planned ahead: sequences are waiting (prefill comes first), running ones sit
  // out of `batch`, none would go on, or a block cannot be had without preemption. Valid until
  // the next call. Sequences that end by a stop token in `batch` are still in it; the engine
  // drops them from it (ScheduledSequence::seq null) and postprocess() skips them.
  const ScheduledBatch* schedule_ahead(const ScheduledBatch& batch);

  // After `batch` ran: advances cached-token counts, publishes the blocks it completed, appends
  // the sampled tokens (one per entry with `samples`, in order) and finishes sequences that
  // stop, freeing their blocks. An entry without a sequence (dropped) only uses up its sample.
  // Returns the finished sequences in batch order, with those that failed on the way (their
  // `error` set).
  std::vector<Sequence*> postprocess(const ScheduledBatch& batch,
                                     const std::vector<SampleResult>& samples);

  // Fails every queued sequence with `reason` and frees its blocks; returns them.
  std::vector<Sequence*> abort_all(const std::string& reason);
  // Fails `seq` with `reason` and frees its blocks if it is queued (waiting or running), or if
  // schedule() failed it and take_failed() has not returned it yet (it keeps its own error).
  // Returns whether it was found.
  bool abort(Sequence* seq, const std::string& reason);

  void set_allocation_hook(BlockAllocationHook hook) {
    block_manager_.set_allocation_hook(std::move(hook));
  }

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
  // Appends the sample of a sequence that reached its end; whether it finished.
  bool append_sample(Sequence& seq, const SampleResult& sample);
  // Ends `seq` (taken off the queues by the caller) with `reason` and frees its blocks.
  void fail(Sequence& seq, std::string reason);

  int max_num_seqs_;
  int max_num_batched_tokens_;
  StopConditions stop_;
  BlockManager block_manager_;
  std::deque<Sequence*> waiting_;
  std::deque<Sequence*> running_;
  ScheduledBatch batch_;
  ScheduledBatch ahead_;           // by schedule_ahead()
  std::vector<Sequence*> failed_;  // by schedule(), not yet taken
  SchedulerStats stats_;
};

}  // namespace nanovllm
