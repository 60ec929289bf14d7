#include "engine/step_inputs.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/check.h"

namespace nanovllm {

struct StepInputs::Offsets {
  int64_t input_ids, positions, slot_mapping, cu_seqlens_q, context_lens, block_tables,
      last_token_indices, seq_order, temperature, top_k, top_p, position, seed, input_rows, end;
};

StepInputs::Offsets StepInputs::layout(const StepShape& s) {
  StepInputs::Offsets o{};
  int64_t at = 0;
  auto take = [&](int64_t words) {
    const int64_t start = at;
    at += words;
    return start;
  };
  o.input_ids = take(s.num_tokens);
  o.positions = take(s.num_tokens);
  o.slot_mapping = take(s.num_tokens);
  o.cu_seqlens_q = take(s.num_seqs + 1);
  o.context_lens = take(s.num_seqs);
  o.block_tables = take(static_cast<int64_t>(s.num_seqs) * s.block_table_width);
  o.last_token_indices = take(s.num_logit_rows);
  o.seq_order = take(s.num_seqs);
  // Sampling controls come last: their row count varies between replays of one graph.
  o.temperature = take(s.num_sampling_rows);
  o.top_k = take(s.num_sampling_rows);
  o.top_p = take(s.num_sampling_rows);
  o.position = take(s.num_sampling_rows);
  at += at % 2;  // int64 seeds on an 8-byte boundary
  o.seed = take(2 * int64_t{s.num_sampling_rows});
  o.input_rows = take(s.num_input_rows);
  o.end = at;
  return o;
}

namespace {

StepShape capacity_shape(const BatchInputCapacity& c) {
  return {c.max_tokens, c.max_seqs, c.max_seqs, c.max_blocks_per_seq, c.max_seqs, c.max_seqs};
}

}  // namespace

StepInputs::StepInputs(const BatchInputCapacity& capacity, Backend& backend)
    : capacity_(capacity), backend_(backend) {
  const int64_t words = layout(capacity_shape(capacity)).end;
  for (size_t i = 0; i < host_.size(); ++i) {
    host_[i].assign(static_cast<size_t>(words), 0);
    host_pins_[i] = HostPin(backend, host_[i].data(), host_[i].size() * sizeof(int32_t));
  }
  device_ = Buffer(static_cast<size_t>(words) * sizeof(int32_t), backend.device());
}

StepInputs::Offsets StepInputs::offsets() const {
  return layout(shape_);
}

void StepInputs::build(const BatchInputs& in, int padded_seqs, int block_table_width) {
  next_host_buffer();
  const int seqs = in.num_seqs();
  const int tokens = in.num_tokens();
  const int padded = std::max(padded_seqs, seqs);
  NVLLM_CHECK_MSG(padded == seqs || tokens == seqs,
                  "only decode batches are padded ({} tokens for {} sequences)", tokens, seqs);
  const int width = std::max(block_table_width, in.block_table_width());
  NVLLM_CHECK_LE(padded, capacity_.max_seqs);
  NVLLM_CHECK_LE(width, capacity_.max_blocks_per_seq);
  const int padded_tokens = tokens + (padded - seqs);
  const int logit_rows = padded > seqs ? padded : static_cast<int>(in.last_token_indices.size());
  shape_ = {padded_tokens,     padded,
            logit_rows,        width,
            in.num_sampling(), static_cast<int>(in.input_rows.size())};
  max_seqlen_q_ = in.max_seqlen_q();
  max_seqlen_k_ = in.max_seqlen_k();
  const Offsets o = offsets();
  used_words_ = o.end;

  std::copy(in.input_ids.begin(), in.input_ids.end(), word(o.input_ids));
  std::copy(in.positions.begin(), in.positions.end(), word(o.positions));
  std::copy(in.slot_mapping.begin(), in.slot_mapping.end(), word(o.slot_mapping));
  std::copy(in.cu_seqlens_q.begin(), in.cu_seqlens_q.end(), word(o.cu_seqlens_q));
  std::copy(in.context_lens.begin(), in.context_lens.end(), word(o.context_lens));
  for (int row = 0; row < seqs; ++row) {
    const int32_t* source =
        in.block_tables.data() + static_cast<size_t>(row) * in.block_table_width();
    int32_t* target = word(o.block_tables + static_cast<int64_t>(row) * width);
    std::copy(source, source + in.block_table_width(), target);
    std::fill(target + in.block_table_width(), target + width, -1);
  }
  if (padded > seqs) {
    for (int row = seqs; row < padded; ++row) {
      const int t = tokens + (row - seqs);
      *word(o.input_ids + t) = 0;
      *word(o.positions + t) = 0;
      *word(o.slot_mapping + t) = -1;
      *word(o.cu_seqlens_q + row + 1) = t + 1;
      *word(o.context_lens + row) = 0;
      std::fill_n(word(o.block_tables + static_cast<int64_t>(row) * width), width, -1);
    }
    for (int row = 0; row < padded; ++row) *word(o.last_token_indices + row) = row;
  } else {
    std::copy(in.last_token_indices.begin(), in.last_token_indices.end(),
              word(o.last_token_indices));
  }

  // Decode attention takes the sequences longest context first (padding rows, context 0, last).
  int32_t* order = word(o.seq_order);
  std::iota(order, order + padded, 0);
  const int32_t* context = word(o.context_lens);
  std::stable_sort(order, order + padded,
                   [context](int32_t a, int32_t b) { return context[a] > context[b]; });
  std::copy(in.input_rows.begin(), in.input_rows.end(), word(o.input_rows));

  NVLLM_CHECK_EQ(static_cast<int>(in.sampling.size()), shape_.num_sampling_rows);
  for (int row = 0; row < shape_.num_sampling_rows; ++row) {
    const BatchInputs::SamplingRow& controls = in.sampling[row];
    std::memcpy(word(o.temperature + row), &controls.temperature, sizeof(float));
    *word(o.top_k + row) = controls.top_k;
    std::memcpy(word(o.top_p + row), &controls.top_p, sizeof(float));
    *word(o.position + row) = controls.position;
    std::memcpy(word(o.seed + 2 * row), &controls.seed, sizeof(uint64_t));
  }
}

void StepInputs::build_padding(int num_seqs, int block_table_width, int max_context) {
  next_host_buffer();
  NVLLM_CHECK_LE(num_seqs, capacity_.max_seqs);
  NVLLM_CHECK_GE(max_context, 1);
  shape_ = {num_seqs, num_seqs, num_seqs, block_table_width, 0, 0};
  max_seqlen_q_ = 1;
  max_seqlen_k_ = max_context;
  const Offsets o = offsets();
  used_words_ = o.end;
  *word(o.cu_seqlens_q) = 0;
  for (int row = 0; row < num_seqs; ++row) {
    *word(o.input_ids + row) = 0;
    *word(o.positions + row) = 0;
    *word(o.slot_mapping + row) = -1;
    *word(o.cu_seqlens_q + row + 1) = row + 1;
    *word(o.context_lens + row) = 0;
    *word(o.last_token_indices + row) = row;
    *word(o.seq_order + row) = row;
  }
  std::fill_n(word(o.block_tables), static_cast<int64_t>(num_seqs) * block_table_width, -1);
}

void StepInputs::upload() {
  upload_tickets_[current_] = backend_.upload_async(
      Tensor(device_.data(), DType::kI32, {used_words_}, device_.device()), host_[current_].data());
}

void StepInputs::next_host_buffer() {
  current_ = (current_ + 1) % host_.size();
  backend_.wait_for(upload_tickets_[current_]);
}

Tensor StepInputs::input_rows() const {
  int32_t* base = static_cast<int32_t*>(device_.data());
  return Tensor(base + offsets().input_rows, DType::kI32, {shape_.num_input_rows},
                device_.device());
}

ForwardBatch StepInputs::forward_batch() const {
  const Offsets o = offsets();
  int32_t* base = static_cast<int32_t*>(device_.data());
  const Device device = device_.device();
  const int64_t tokens = shape_.num_tokens;
  const int64_t seqs = shape_.num_seqs;
  ForwardBatch batch;
  batch.input_ids = Tensor(base + o.input_ids, DType::kI32, {tokens}, device);
  batch.positions = Tensor(base + o.positions, DType::kI32, {tokens}, device);
  batch.last_token_indices =
      Tensor(base + o.last_token_indices, DType::kI32, {shape_.num_logit_rows}, device);
  AttentionMetadata& a = batch.attention;
  a.num_seqs = shape_.num_seqs;
  a.max_seqlen_q = max_seqlen_q_;
  a.max_seqlen_k = max_seqlen_k_;
  a.cu_seqlens_q = Tensor(base + o.cu_seqlens_q, DType::kI32, {seqs + 1}, device);
  a.context_lens = Tensor(base + o.context_lens, DType::kI32, {seqs}, device);
  a.block_tables =
      Tensor(base + o.block_tables, DType::kI32, {seqs, shape_.block_table_width}, device);
  a.slot_mapping = Tensor(base + o.slot_mapping, DType::kI32, {tokens}, device);
  a.seq_order = Tensor(base + o.seq_order, DType::kI32, {seqs}, device);
  // This step's host buffer stays as it is until the build after next.
  a.host_cu_seqlens_q = host_[current_].data() + o.cu_seqlens_q;
  a.host_context_lens = host_[current_].data() + o.context_lens;
  return batch;
}

SamplingTensors StepInputs::sampling() const {
  const Offsets o = offsets();
  int32_t* base = static_cast<int32_t*>(device_.data());
  const Device device = device_.device();
  const int64_t rows = shape_.num_sampling_rows;
  SamplingTensors s;
  s.temperature = Tensor(base + o.temperature, DType::kF32, {rows}, device);
  s.top_k = Tensor(base + o.top_k, DType::kI32, {rows}, device);
  s.top_p = Tensor(base + o.top_p, DType::kF32, {rows}, device);
  s.position = Tensor(base + o.position, DType::kI32, {rows}, device);
  s.seed = Tensor(base + o.seed, DType::kI64, {rows}, device);
  return s;
}

}  // namespace nanovllm
