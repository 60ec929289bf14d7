#include "fake_executor.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"

namespace nanovllm::testing {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<float> fake_logits(std::span<const int> history, int vocab) {
  uint64_t state = 0x1234;
  for (int token : history) state = splitmix64(state ^ static_cast<uint64_t>(token));
  std::vector<float> logits(vocab);
  for (int i = 0; i < vocab; ++i) {
    const double unit = static_cast<double>(splitmix64(state + i) >> 11) * 0x1.0p-53;
    logits[i] = static_cast<float>(unit * 8.0 - 4.0);
  }
  return logits;
}

FakeExecutor::FakeExecutor(int num_kvcache_blocks, int block_size, int vocab_size,
                           int max_model_len) {
  limits_.num_kvcache_blocks = num_kvcache_blocks;
  limits_.block_size = block_size;
  limits_.vocab_size = vocab_size;
  limits_.max_model_len = max_model_len;
  slots_.resize(static_cast<size_t>(num_kvcache_blocks) * block_size);
}

FakeExecutor::Slot& FakeExecutor::slot(const Sequence& seq, int position) {
  const int block_size = limits_.block_size;
  const int block_index = position / block_size;
  if (block_index >= static_cast<int>(seq.block_table.size())) {
    throw Error(fmt::format("sequence {}: position {} has no block ({} held)", seq.id, position,
                            seq.block_table.size()));
  }
  const int block = seq.block_table[block_index];
  if (block < 0 || block >= limits_.num_kvcache_blocks) {
    throw Error(fmt::format("sequence {}: block id {} out of range", seq.id, block));
  }
  return slots_[static_cast<size_t>(block) * block_size + position % block_size];
}

void FakeExecutor::execute(const ScheduledBatch& batch, std::vector<SampleResult>& samples_out) {
  start(batch);
  finish(samples_out);
}

void FakeExecutor::finish(std::vector<SampleResult>& samples_out) {
  if (started_.empty()) throw Error("no step in flight to finish");
  samples_out = std::move(started_.front());
  started_.pop_front();
}

void FakeExecutor::start(const ScheduledBatch& batch) {
  if (started_.size() >= 2) throw Error("two steps in flight already");
  std::vector<SampleResult> samples_out;
  if (faults_.before_step) faults_.before_step(batch);
  ++step_;
  RecordedStep& record = steps_.emplace_back();
  record.is_prefill = batch.is_prefill;

  // The token at `position` of the entry's sequence: the host's, or for an entry planned
  // ahead the one the step before sampled (position num_tokens()).
  const auto token_at = [&](const ScheduledSequence& entry, int position) {
    const Sequence& seq = *entry.seq;
    if (position < seq.num_tokens()) return seq.token_ids[position];
    const int row = entry.input_row;
    if (row < 0 || row >= static_cast<int>(last_samples_.size())) {
      throw Error(fmt::format("sequence {}: input row {} of {} samples", seq.id, row,
                              last_samples_.size()));
    }
    return last_samples_[row].token_id;
  };
  // Positions [begin, end) of an entry.
  const auto range = [](const ScheduledSequence& entry) {
    const Sequence& seq = *entry.seq;
    const int begin = entry.input_row >= 0 ? seq.num_tokens() : seq.num_cached_tokens;
    return std::pair<int, int>(begin, begin + entry.num_new_tokens);
  };

  // Store this step's K/V for every sequence first (as each layer does before attention).
  for (const ScheduledSequence& entry : batch.seqs) {
    const Sequence& seq = *entry.seq;
    const auto [begin, end] = range(entry);
    record.entries.push_back(
        {seq.id, begin, entry.num_new_tokens, entry.samples, entry.input_row >= 0});
    const int known = seq.num_tokens() + (entry.input_row >= 0 ? 1 : 0);
    if (entry.num_new_tokens <= 0 || end > known) {
      throw Error(
          fmt::format("sequence {}: scheduled [{}, {}) of {} tokens", seq.id, begin, end, known));
    }
    if (entry.samples != (end == known)) {
      throw Error(fmt::format("sequence {}: samples={} for [{}, {}) of {}", seq.id, entry.samples,
                              begin, end, known));
    }
    for (int position = begin; position < end; ++position) {
      slot(seq, position) = {token_at(entry, position), position, step_};
    }
  }

  // Read every history back through the block tables, then sample.
  std::vector<int> history;
  for (const ScheduledSequence& entry : batch.seqs) {
    const Sequence& seq = *entry.seq;
    const auto [begin, end] = range(entry);
    history.clear();
    for (int position = 0; position < end; ++position) {
      const Slot& stored = slot(seq, position);
      const int expected = token_at(entry, position);
      if (stored.position != position || stored.token != expected) {
        throw Error(fmt::format(
            "sequence {}: KV at position {} holds token {} of position {}, expected token {}",
            seq.id, position, stored.token, stored.position, expected));
      }
      if (position < begin && stored.step >= step_) {
        throw Error(fmt::format(
            "sequence {}: position {} counted as cached but its K/V is written only now", seq.id,
            position));
      }
      history.push_back(stored.token);
    }
    if (!entry.samples) continue;
    std::vector<float> logits = fake_logits(history, limits_.vocab_size);
    if (faults_.on_logits) faults_.on_logits(seq, logits);
    try {
      // The token being sampled sits at index `end` of the sequence.
      samples_out.push_back(sample_token(logits, seq.params, seq.seed, end));
    } catch (const Error& error) {
      SampleResult failed;
      failed.error = error.what();
      samples_out.push_back(std::move(failed));
    }
  }
  last_samples_ = samples_out;
  started_.push_back(std::move(samples_out));
}

RequestOutput reference_generate(const std::vector<int>& prompt, const SamplingParams& params,
                                 const std::vector<int>& eos_token_ids, int max_model_len,
                                 int vocab_size) {
  NVLLM_CHECK(params.is_greedy() || params.seed.has_value());
  RequestOutput output;
  output.prompt_token_ids = prompt;
  std::vector<int> history = prompt;
  if (params.logprobs) output.logprobs.emplace();
  const auto contains = [](const std::vector<int>& ids, int id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  for (;;) {
    const SampleResult sample =
        sample_token(fake_logits(history, vocab_size), params, params.seed.value_or(0),
                     static_cast<int>(history.size()));
    history.push_back(sample.token_id);
    output.token_ids.push_back(sample.token_id);
    if (params.logprobs) output.logprobs->push_back(*sample.logprobs);
    if ((!params.ignore_eos && contains(eos_token_ids, sample.token_id)) ||
        contains(params.stop_token_ids, sample.token_id)) {
      output.finish_reason = "stop";
      break;
    }
    if (static_cast<int>(output.token_ids.size()) >= params.max_tokens ||
        static_cast<int>(history.size()) >= max_model_len) {
      output.finish_reason = "length";
      break;
    }
  }
  return output;
}

}  // namespace nanovllm::testing
