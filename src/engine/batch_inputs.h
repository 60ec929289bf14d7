// The host side of one step's model inputs: token ids, positions and the paged-attention
// metadata of a scheduled batch, in int32 buffers sized once for the largest step.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model_executor.h"

namespace nanovllm {

struct BatchInputCapacity {
  int max_tokens = 0;          // rows per step
  int max_seqs = 0;            // sequences per step
  int max_blocks_per_seq = 0;  // block-table width
};

class BatchInputs {
 public:
  explicit BatchInputs(const BatchInputCapacity& capacity);

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

 private:
  BatchInputCapacity capacity_;
  int num_sampling_ = 0;
  int block_table_width_ = 0;
  int max_seqlen_q_ = 0;
  int max_seqlen_k_ = 0;
};

}  // namespace nanovllm
