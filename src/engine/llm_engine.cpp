#include "engine/llm_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "core/check.h"
#include "core/logging.h"
#include "engine/progress.h"

namespace nanovllm {

LLMEngine::LLMEngine(const EngineConfig& config, std::unique_ptr<ModelExecutor> executor,
                     std::vector<int> eos_token_ids, TokenTextDecoderFactory decoder_factory)
    : config_(config),
      executor_(std::move(executor)),
      decoder_factory_(std::move(decoder_factory)),
      rng_(config.seed) {
  config_.validate();
  NVLLM_CHECK(executor_ != nullptr);
  limits_ = executor_->limits();
  NVLLM_CHECK_EQ(limits_.block_size, config_.kvcache_block_size);
  NVLLM_CHECK_GT(limits_.num_kvcache_blocks, 0);
  NVLLM_CHECK_GT(limits_.vocab_size, 0);
  NVLLM_CHECK_GT(limits_.max_model_len, 0);
  if (config_.num_kvcache_blocks > 0) {
    NVLLM_CHECK_EQ(limits_.num_kvcache_blocks, config_.num_kvcache_blocks);
  }

  SchedulerConfig scheduler_config;
  scheduler_config.max_num_seqs = config_.max_num_seqs;
  scheduler_config.max_num_batched_tokens = config_.max_num_batched_tokens;
  scheduler_config.num_kvcache_blocks = limits_.num_kvcache_blocks;
  scheduler_config.block_size = limits_.block_size;
  scheduler_config.enable_prefix_caching = config_.enable_prefix_caching;
  scheduler_config.eos_token_ids = std::move(eos_token_ids);
  scheduler_config.max_model_len = limits_.max_model_len;
  scheduler_ = std::make_unique<Scheduler>(scheduler_config);
  run_ahead_ = config_.async_scheduling && executor_->can_run_ahead();

  const int64_t capacity = static_cast<int64_t>(limits_.num_kvcache_blocks) * limits_.block_size;
  if (capacity < limits_.max_model_len) {
    NVLLM_LOG_WARN(
        "the KV cache holds {} tokens ({} blocks of {}), fewer than max_model_len {}: sequences "
        "are limited to {} tokens",
        capacity, limits_.num_kvcache_blocks, limits_.block_size, limits_.max_model_len,
        max_model_len());
  }
}

std::optional<std::string> LLMEngine::check_request(const std::vector<int>& prompt_token_ids,
                                                    const SamplingParams& params) const {
  try {
    params.validate();
  } catch (const Error& error) {
    return std::string(error.what());
  }
  if (!params.stop.empty() && !decoder_factory_) {
    return std::string("stop strings need a text decoder, and this engine has none");
  }
  if (prompt_token_ids.empty()) return std::string("the prompt is empty");
  for (size_t i = 0; i < prompt_token_ids.size(); ++i) {
    const int id = prompt_token_ids[i];
    if (id < 0 || id >= limits_.vocab_size) {
      return fmt::format("prompt token {} at position {} is outside the vocabulary [0, {})", id, i,
                         limits_.vocab_size);
    }
  }
  const int64_t length = static_cast<int64_t>(prompt_token_ids.size());
  if (length > limits_.max_model_len) {
    return fmt::format("the prompt has {} tokens, more than max_model_len {}", length,
                       limits_.max_model_len);
  }
  if (length > max_model_len()) {
    return fmt::format(
        "the prompt has {} tokens but the KV cache holds only {} ({} blocks of {}), so it can "
        "never be scheduled",
        length, max_model_len(), limits_.num_kvcache_blocks, limits_.block_size);
  }
  return std::nullopt;
}

int64_t LLMEngine::add_request(std::vector<int> prompt_token_ids, const SamplingParams& params) {
  const int64_t id = next_request_id_++;
  if (std::optional<std::string> problem = check_request(prompt_token_ids, params)) {
    RequestOutput output;
    output.request_id = id;
    output.prompt_token_ids = std::move(prompt_token_ids);
    output.error = std::move(*problem);
    NVLLM_LOG_DEBUG("request {} rejected: {}", id, output.error);
    ready_.push_back(std::move(output));
    return id;
  }
  const uint64_t seed = params.seed ? *params.seed : rng_();
  auto seq = std::make_unique<Sequence>(id, std::move(prompt_token_ids), params, seed);
  if (decoder_factory_) seq->decoder = decoder_factory_(seq->prompt_token_ids());
  scheduler_->add(seq.get());
  sequences_.emplace(id, std::move(seq));
  return id;
}

RequestOutput LLMEngine::take_output(Sequence& seq) {
  RequestOutput output;
  output.request_id = seq.id;
  const std::span<const int> prompt = seq.prompt_token_ids();
  const std::span<const int> completion = seq.completion_token_ids();
  output.prompt_token_ids.assign(prompt.begin(), prompt.end());
  output.token_ids.assign(completion.begin(), completion.end());
  output.text = std::move(seq.text);
  output.finish_reason = std::move(seq.finish_reason);
  if (seq.params.logprobs) output.logprobs = std::move(seq.logprobs);
  output.error = std::move(seq.error);
  return output;
}

void LLMEngine::take_outputs(const std::vector<Sequence*>& seqs,
                             std::vector<RequestOutput>& outputs) {
  for (Sequence* seq : seqs) {
    if (!seq->error.empty()) NVLLM_LOG_DEBUG("request {} failed: {}", seq->id, seq->error);
    outputs.push_back(take_output(*seq));
    sequences_.erase(seq->id);
  }
}

bool LLMEngine::runs_ahead(const ScheduledBatch& batch) const {
  if (!run_ahead_ || batch.is_prefill) return false;
  // Logprobs come back with the samples, which a step planned ahead would have to wait for.
  return std::none_of(batch.seqs.begin(), batch.seqs.end(), [](const ScheduledSequence& entry) {
    return entry.seq != nullptr && entry.seq->params.logprobs.has_value();
  });
}

StepResult LLMEngine::step() {
  StepResult result;
  if (in_flight_.empty() && !scheduler_->is_finished()) {
    const ScheduledBatch& batch = scheduler_->schedule();
    const std::vector<Sequence*> failed = scheduler_->take_failed();
    take_outputs(failed, ready_);
    // A sequence that had to give up its blocks is back in `waiting` and gets them next step;
    // twice in a row with nothing run or failed means nothing can ever run.
    consecutive_empty_steps_ = batch.empty() && failed.empty() ? consecutive_empty_steps_ + 1 : 0;
    if (consecutive_empty_steps_ > 1) throw Error("scheduler: no sequence can be scheduled");
    if (!batch.empty()) {
      if (runs_ahead(batch)) {
        executor_->start(batch);
        in_flight_.push_back(batch);
      } else {
        executor_->execute(batch, samples_);
        complete(batch, result);
      }
    }
  }
  if (!in_flight_.empty()) {
    // The next decode step goes to the device before this one's samples come back, so that
    // the host takes them (and plans the step after) while the device works.
    const ScheduledBatch* ahead =
        runs_ahead(in_flight_.front()) ? scheduler_->schedule_ahead(in_flight_.front()) : nullptr;
    std::exception_ptr start_failure;
    if (ahead != nullptr) {
      try {
        executor_->start(*ahead);
        in_flight_.push_back(*ahead);
      } catch (...) {
        start_failure = std::current_exception();  // after the step before is applied
      }
    }
    const ScheduledBatch done = std::move(in_flight_.front());
    in_flight_.pop_front();
    executor_->finish(samples_);
    complete(done, result);
    // The outputs it completed stay in ready_, which abort_all() returns.
    if (start_failure) std::rethrow_exception(start_failure);
  }
  result.finished = std::exchange(ready_, {});
  return result;
}

void LLMEngine::complete(const ScheduledBatch& batch, StepResult& result) {
  result.device_wait_seconds = executor_->last_step_device_wait_seconds();
  if (batch.is_prefill) {
    result.num_prefill_tokens = batch.num_tokens();
  } else {
    result.num_decode_tokens = static_cast<int>(
        std::count_if(batch.seqs.begin(), batch.seqs.end(),
                      [](const ScheduledSequence& entry) { return entry.seq != nullptr; }));
  }
  const std::vector<Sequence*> finished = scheduler_->postprocess(batch, samples_);
  // A step already started for a sequence that has just ended computes nothing it needs.
  for (ScheduledBatch& started : in_flight_) {
    for (ScheduledSequence& entry : started.seqs) {
      if (std::find(finished.begin(), finished.end(), entry.seq) != finished.end()) {
        entry.seq = nullptr;
      }
    }
  }
  take_outputs(finished, ready_);
}

void LLMEngine::drain_in_flight() {
  while (!in_flight_.empty()) {
    const ScheduledBatch done = std::move(in_flight_.front());
    in_flight_.pop_front();
    StepResult ignored;
    executor_->finish(samples_);
    complete(done, ignored);
  }
}

std::vector<RequestOutput> LLMEngine::abort_all(const std::string& reason) {
  // Steps in flight are waited for but not applied: everything queued fails anyway, and after
  // a failed step they may fail again.
  while (!in_flight_.empty()) {
    in_flight_.pop_front();
    try {
      executor_->finish(samples_);
    } catch (const std::exception& error) {
      NVLLM_LOG_DEBUG("a step in flight failed while aborting: {}", error.what());
    }
  }
  std::vector<RequestOutput> outputs = std::exchange(ready_, {});
  take_outputs(scheduler_->abort_all(reason), outputs);
  NVLLM_CHECK_EQ(sequences_.size(), 0u);
  return outputs;
}

std::optional<RequestOutput> LLMEngine::abort_request(int64_t id, const std::string& reason) {
  // The steps in flight may name the sequence: they are applied first.
  drain_in_flight();
  const auto ready = std::find_if(ready_.begin(), ready_.end(), [id](const RequestOutput& output) {
    return output.request_id == id;
  });
  if (ready != ready_.end()) {
    RequestOutput output = std::move(*ready);
    ready_.erase(ready);
    return output;
  }
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) return std::nullopt;
  Sequence* seq = it->second.get();
  NVLLM_CHECK(scheduler_->abort(seq, reason));
  std::vector<RequestOutput> outputs;
  take_outputs({seq}, outputs);
  return std::move(outputs.front());
}

const Sequence* LLMEngine::sequence(int64_t id) const {
  const auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : it->second.get();
}

namespace {

// Adds one step to the statistics; steps that ran no batch are not counted.
void record_step(const StepResult& result, double seconds, GenerateStats& stats) {
  if (result.num_prefill_tokens == 0 && result.num_decode_tokens == 0) return;
  ++stats.steps;
  if (result.num_prefill_tokens > 0) {
    ++stats.prefill_steps;
    stats.prefill_tokens += result.num_prefill_tokens;
    stats.prefill_seconds += seconds;
  } else {
    ++stats.decode_steps;
    stats.decode_tokens += result.num_decode_tokens;
    stats.decode_seconds += seconds;
  }
  stats.device_wait_seconds += result.device_wait_seconds;
  stats.host_seconds += seconds - result.device_wait_seconds;
}

}  // namespace

std::vector<RequestOutput> LLMEngine::generate(const std::vector<std::vector<int>>& prompts,
                                               const SamplingParams& params, bool use_progress) {
  return generate(prompts, std::vector<SamplingParams>{params}, use_progress);
}

std::vector<RequestOutput> LLMEngine::generate(const std::vector<std::vector<int>>& prompts,
                                               const std::vector<SamplingParams>& params,
                                               bool use_progress,
                                               const GenerateCallbacks& callbacks) {
  if (!is_finished()) throw Error("generate() needs an idle engine, but requests are in flight");
  if (params.size() != 1 && params.size() != prompts.size()) {
    throw Error(fmt::format("generate(): {} sampling params for {} prompts (give 1 or {})",
                            params.size(), prompts.size(), prompts.size()));
  }
  std::vector<RequestOutput> outputs(prompts.size());
  try {
    std::unordered_map<int64_t, size_t> index_of;
    for (size_t i = 0; i < prompts.size(); ++i) {
      index_of[add_request(prompts[i], params.size() == 1 ? params[0] : params[i])] = i;
    }
    run_to_completion(index_of, outputs, use_progress, callbacks);
  } catch (...) {
    abort_all("generate() was abandoned");  // the engine stays usable
    throw;
  }
  return outputs;
}

void LLMEngine::run_to_completion(const std::unordered_map<int64_t, size_t>& index_of,
                                  std::vector<RequestOutput>& outputs, bool use_progress,
                                  const GenerateCallbacks& callbacks) {
  ProgressLine progress(static_cast<int>(outputs.size()), use_progress);
  GenerateStats stats;
  const auto generate_start = std::chrono::steady_clock::now();
  while (!is_finished()) {
    const auto start = std::chrono::steady_clock::now();
    StepResult result;
    const std::string stop_reason = callbacks.should_stop ? callbacks.should_stop() : "";
    if (!stop_reason.empty()) {
      result.finished = abort_all(stop_reason);
    } else {
      try {
        result = step();
      } catch (const std::exception& error) {
        // Not one request's trouble: the step as a whole failed (device, memory for the batch).
        NVLLM_LOG_ERROR("generate() stopped, the engine failed: {}", error.what());
        result.finished = abort_all(fmt::format("the engine failed: {}", error.what()));
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    record_step(result, seconds, stats);
    progress.add_step(static_cast<int>(result.finished.size()), result.num_prefill_tokens,
                      result.num_decode_tokens, seconds);
    for (RequestOutput& output : result.finished) {
      const size_t index = index_of.at(output.request_id);
      outputs[index] = std::move(output);
      if (callbacks.on_output) callbacks.on_output(index, outputs[index]);
    }
  }
  progress.close();
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - generate_start).count();
  last_generate_stats_ = stats;
}

}  // namespace nanovllm
