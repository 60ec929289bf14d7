// One step's inputs on the device: token ids, positions, attention metadata and per-row
// sampling controls, packed into one buffer and uploaded with one copy.
//
// The packing depends only on the row counts (tokens, sequences, sampling rows) and the block
// table width, so a decode batch padded to a captured size lands at the addresses the graph
// was recorded with.
#pragma once

#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "engine/batch_inputs.h"
#include "kernels/backend.h"
#include "model/qwen3_model.h"

namespace nanovllm {

struct StepShape {
  int num_tokens = 0;         // rows of input_ids
  int num_seqs = 0;           // sequences (attention metadata rows)
  int num_logit_rows = 0;     // rows of last_token_indices (logits computed)
  int block_table_width = 0;  // columns of the block table
  int num_sampling_rows = 0;  // rows of the sampling controls
};

class StepInputs {
 public:
  StepInputs(const BatchInputCapacity& capacity, Backend& backend);

  // Lays out `inputs` (and the sampling controls of its sampling sequences, in batch order)
  // padded to `padded_seqs` decode rows when that is larger (padding rows: token 0,
  // position 0, slot -1, context length 0), with `block_table_width` columns (0: the batch's).
  void build(const BatchInputs& inputs, const ScheduledBatch& batch, int padded_seqs = 0,
             int block_table_width = 0);
  // A decode batch of `num_seqs` padding rows only, for warming up and capturing graphs.
  void build_padding(int num_seqs, int block_table_width);

  void upload();

  ForwardBatch forward_batch() const;
  SamplingTensors sampling() const;  // the first shape().num_sampling_rows rows
  const StepShape& shape() const { return shape_; }

 private:
  struct Offsets;  // int32 word offsets of each region in the packed buffer
  static Offsets layout(const StepShape& shape);
  Offsets offsets() const;
  int32_t* word(int64_t offset) { return host_.data() + offset; }

  BatchInputCapacity capacity_;
  Backend& backend_;
  StepShape shape_;
  int max_seqlen_q_ = 0;
  int max_seqlen_k_ = 0;
  int64_t used_words_ = 0;
  std::vector<int32_t> host_;  // the packed layout, built on the host
  Buffer device_;              // the same layout on the device
};

}  // namespace nanovllm
