#include "engine/batch_inputs.h"

#include <algorithm>

#include "core/check.h"

namespace nanovllm {

BatchInputCapacity step_capacity(const EngineConfig& config, int max_model_len) {
  BatchInputCapacity capacity;
  // Prefill steps carry up to max_num_batched_tokens rows, decode steps one per sequence.
  capacity.max_tokens = std::max(config.max_num_batched_tokens, config.max_num_seqs);
  capacity.max_seqs = config.max_num_seqs;
  capacity.max_blocks_per_seq =
      (max_model_len + config.kvcache_block_size - 1) / config.kvcache_block_size;
  return capacity;
}

BatchInputs::BatchInputs(const BatchInputCapacity& capacity) : capacity_(capacity) {
  NVLLM_CHECK_GT(capacity.max_tokens, 0);
  NVLLM_CHECK_GT(capacity.max_seqs, 0);
  NVLLM_CHECK_GT(capacity.max_blocks_per_seq, 0);
  input_ids.reserve(capacity.max_tokens);
  positions.reserve(capacity.max_tokens);
  slot_mapping.reserve(capacity.max_tokens);
  cu_seqlens_q.reserve(capacity.max_seqs + 1);
  context_lens.reserve(capacity.max_seqs);
  block_tables.reserve(static_cast<size_t>(capacity.max_seqs) * capacity.max_blocks_per_seq);
  last_token_indices.reserve(capacity.max_seqs);
  input_rows.reserve(capacity.max_seqs);
  sampling.reserve(capacity.max_seqs);
}

int BatchInputs::max_logprobs() const {
  int most = -1;
  for (const SamplingRow& row : sampling) most = std::max(most, row.logprobs);
  return most;
}

void BatchInputs::build(const ScheduledBatch& batch, int block_size) {
  NVLLM_CHECK(!batch.empty());
  const int num_seqs = static_cast<int>(batch.seqs.size());
  const int num_tokens = batch.num_tokens();
  NVLLM_CHECK_LE(num_seqs, capacity_.max_seqs);
  NVLLM_CHECK_LE(num_tokens, capacity_.max_tokens);

  input_ids.clear();
  positions.clear();
  slot_mapping.clear();
  cu_seqlens_q.assign(1, 0);
  context_lens.clear();
  last_token_indices.clear();
  input_rows.clear();
  sampling.clear();
  is_prefill_ = batch.is_prefill;
  block_table_width_ = 0;
  max_seqlen_q_ = 0;
  max_seqlen_k_ = 0;
  num_sampling_ = 0;

  const bool ahead = batch.seqs.front().input_row >= 0;
  for (const ScheduledSequence& entry : batch.seqs) {
    const Sequence& seq = *entry.seq;
    NVLLM_CHECK_MSG((entry.input_row >= 0) == ahead,
                    "a batch mixes entries planned ahead with others (sequence {})", seq.id);
    // Ahead, the sequence's last sample (position num_tokens()) is still on the device.
    const int known = seq.num_tokens() + (ahead ? 1 : 0);
    const int begin = ahead ? seq.num_tokens() : seq.num_cached_tokens;
    const int end = begin + entry.num_new_tokens;
    NVLLM_CHECK_MSG(entry.num_new_tokens > 0 && end <= known &&
                        (!ahead || (entry.num_new_tokens == 1 && entry.samples &&
                                    seq.num_cached_tokens + 1 == begin)),
                    "sequence {} schedules tokens [{}, {}) of {}", seq.id, begin, end, known);
    const int blocks_needed = (end + block_size - 1) / block_size;
    NVLLM_CHECK_MSG(static_cast<int>(seq.block_table.size()) >= blocks_needed,
                    "sequence {} holds {} blocks for {} tokens", seq.id, seq.block_table.size(),
                    end);
    if (ahead) input_rows.push_back(entry.input_row);
    for (int position = begin; position < end; ++position) {
      input_ids.push_back(position < seq.num_tokens() ? seq.token_ids[position] : 0);
      positions.push_back(position);
      slot_mapping.push_back(seq.block_table[position / block_size] * block_size +
                             position % block_size);
    }
    cu_seqlens_q.push_back(cu_seqlens_q.back() + entry.num_new_tokens);
    context_lens.push_back(end);
    if (entry.samples) {
      last_token_indices.push_back(cu_seqlens_q.back() - 1);
      ++num_sampling_;
      sampling.push_back({seq.params.temperature, seq.params.top_k, seq.params.top_p, seq.seed, end,
                          seq.params.logprobs.value_or(-1)});
    }
    block_table_width_ = std::max(block_table_width_, static_cast<int>(seq.block_table.size()));
    max_seqlen_q_ = std::max(max_seqlen_q_, entry.num_new_tokens);
    max_seqlen_k_ = std::max(max_seqlen_k_, end);
  }
  if (last_token_indices.empty()) last_token_indices.push_back(num_tokens - 1);

  NVLLM_CHECK_LE(block_table_width_, capacity_.max_blocks_per_seq);
  block_tables.assign(static_cast<size_t>(num_seqs) * block_table_width_, -1);
  for (int i = 0; i < num_seqs; ++i) {
    const std::vector<int>& table = batch.seqs[i].seq->block_table;
    std::copy(table.begin(), table.end(),
              block_tables.begin() + static_cast<size_t>(i) * block_table_width_);
  }
}

}  // namespace nanovllm
