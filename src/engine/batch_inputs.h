// One step as plain data: the token ids, positions and paged-attention metadata of a scheduled
// batch, and the sampling controls of its sampling rows, in buffers sized once for the largest
// step. It is all a rank needs to run the step (over a tensor-parallel group every rank runs the
// one the engine built).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model_executor.h"
#include "nanovllm/engine_config.h"

namespace nanovllm {

struct BatchInputCapacity {
  int max_tokens = 0;          // rows per step
  int max_seqs = 0;            // sequences per step
  int max_blocks_per_seq = 0;  // block-table width
};

// What the largest step of an engine with `config` holds, for a model of `max_model_len`.
BatchInputCapacity step_capacity(const EngineConfig& config, int max_model_len);

class BatchInputs {
 public:
  explicit BatchInputs(const BatchInputCapacity& capacity);

  // One sampling row's controls (a sequence whose step samples), in batch order.
  struct SamplingRow {
    float temperature = 1.0f;
    int32_t top_k = 0;
    float top_p = 1.0f;
    uint64_t seed = 0;
    int32_t position = 0;   // the index in its sequence of the token sampled
    int32_t logprobs = -1;  // top logprobs asked for; -1: none
  };

  // Lays out `batch`: sequence i contributes rows for its tokens
  // [num_cached_tokens, num_cached_tokens + num_new_tokens), or, for an entry with input_row
  // set, the row of token num_tokens() (its id 0 here, the device's sample in the end). Throws
  // Error when the batch exceeds the capacity.
  void build(const ScheduledBatch& batch, int block_size);

  int num_tokens() const { return static_cast<int>(input_ids.size()); }
  int num_seqs() const { return static_cast<int>(context_lens.size()); }
  int num_sampling() const { return num_sampling_; }
  int block_table_width() const { return block_table_width_; }
  int max_seqlen_q() const { return max_seqlen_q_; }
  int max_seqlen_k() const { return max_seqlen_k_; }
  bool is_prefill() const { return is_prefill_; }
  // The most top logprobs a sampling row asks for; -1 when none asks.
  int max_logprobs() const;

  std::vector<int32_t> input_ids;  // [T]
  std::vector<int32_t> positions;  // [T]
  std::vector<int32_t>
      slot_mapping;  // [T] block_table[p / block_size] * block_size + p % block_size
  std::vector<int32_t> cu_seqlens_q;  // [S + 1]
  std::vector<int32_t> context_lens;  // [S] cached + new tokens
  std::vector<int32_t> block_tables;  // [S, block_table_width], -1 past a sequence's blocks
  // [max(num_sampling, 1)] the last row of each sampling sequence; when no sequence samples
  // (only prompt chunks) the last row, whose logits are ignored, so the model never sees B = 0.
  std::vector<int32_t> last_token_indices;
  // [T] for a batch of input_row entries (every entry or none): the row of the previous step's
  // samples each row's token comes from; empty otherwise.
  std::vector<int32_t> input_rows;
  std::vector<SamplingRow> sampling;  // [num_sampling]

 private:
  BatchInputCapacity capacity_;
  int num_sampling_ = 0;
  int block_table_width_ = 0;
  int max_seqlen_q_ = 0;
  int max_seqlen_k_ = 0;
  bool is_prefill_ = false;
};

}  // namespace nanovllm
