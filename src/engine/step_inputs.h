// One step's inputs on the device: token ids, positions, attention metadata and per-row
// sampling controls, packed into one buffer and uploaded with one copy.
//
// The packing depends only on the row counts (tokens, sequences, sampling rows) and the block
// table width, so a decode batch padded to a captured size lands at the addresses the graph
// was recorded with.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "engine/batch_inputs.h"
#include "kernels/backend.h"
#include "model/causal_lm.h"

namespace nanovllm {

struct StepShape {
  int num_tokens = 0;         // rows of input_ids
  int num_seqs = 0;           // sequences (attention metadata rows)
  int num_logit_rows = 0;     // rows of last_token_indices (logits computed)
  int block_table_width = 0;  // columns of the block table
  int num_sampling_rows = 0;  // rows of the sampling controls
  int num_input_rows = 0;     // rows whose token comes from the previous step's samples
};

class StepInputs {
 public:
  StepInputs(const BatchInputCapacity& capacity, Backend& backend);

  // Lays out `inputs` (and their sampling controls) padded to `padded_seqs` decode rows when
  // that is larger (padding rows: token 0, position 0, slot -1, context length 0), with
  // `block_table_width` columns (0: the batch's).
  void build(const BatchInputs& inputs, int padded_seqs = 0, int block_table_width = 0);
  // A decode batch of `num_seqs` padding rows only, for warming up and capturing graphs that
  // are replayed for contexts of up to `max_context` tokens (its max_seqlen_k).
  void build_padding(int num_seqs, int block_table_width, int max_context);

  // Enqueues the copy of the packed inputs to the device without waiting for it: the host
  // buffers alternate, so a build waits only for the upload before last.
  void upload();

  ForwardBatch forward_batch() const;
  SamplingTensors sampling() const;  // the first shape().num_sampling_rows rows
  // int32 [num_input_rows]: BatchInputs::input_rows on the device.
  Tensor input_rows() const;
  const StepShape& shape() const { return shape_; }

 private:
  struct Offsets;  // int32 word offsets of each region in the packed buffer
  static Offsets layout(const StepShape& shape);
  Offsets offsets() const;
  int32_t* word(int64_t offset) { return host_[current_].data() + offset; }
  // Moves to the other host buffer, once its last upload has read it.
  void next_host_buffer();

  BatchInputCapacity capacity_;
  Backend& backend_;
  StepShape shape_;
  int max_seqlen_q_ = 0;
  int max_seqlen_k_ = 0;
  int64_t used_words_ = 0;
  // The packed layout, built on the host in two buffers taken in turn (page-locked, so that
  // the upload need not stage them), with the tickets of their last uploads.
  std::array<std::vector<int32_t>, 2> host_;
  std::array<HostPin, 2> host_pins_;
  std::array<uint64_t, 2> upload_tickets_{};
  size_t current_ = 0;
  Buffer device_;  // the same layout on the device
};

}  // namespace nanovllm
