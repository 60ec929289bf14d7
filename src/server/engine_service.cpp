#include "server/engine_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "core/logging.h"
#include "engine/llm_engine.h"

namespace nanovllm {
namespace {

constexpr int kClientClosedStatus = 499;  // nginx's "client closed request": nobody reads it

double seconds_between(EngineService::Clock::time_point from, EngineService::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// The longest prefix of text[0, end) that does not split a UTF-8 character, at least `floor`.
size_t utf8_boundary_at_or_before(const std::string& text, size_t end, size_t floor) {
  while (end > floor && end < text.size() &&
         (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return end;
}

template <typename T>
std::vector<T> tail_from(const std::vector<T>& items, size_t from) {
  if (from >= items.size()) return {};
  return std::vector<T>(items.begin() + static_cast<std::ptrdiff_t>(from), items.end());
}

}  // namespace

EngineService::EngineService(LLMEngine& engine, ServerMetrics& metrics, size_t max_pending_requests)
    : engine_(engine), metrics_(metrics), max_pending_requests_(max_pending_requests) {
  update_gauges();
  thread_ = std::thread([this] { run(); });
}

EngineService::~EngineService() {
  shutdown("the server stopped");
}

EngineService::Admission EngineService::submit(std::vector<EngineJob> jobs,
                                               std::shared_ptr<GenerationStream> stream) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return Admission::kShuttingDown;
    const size_t running = running_.load(std::memory_order_relaxed);
    const size_t waiting = unfinished_ > running ? unfinished_ - running : 0;
    if (waiting + jobs.size() > max_pending_requests_) {
      metrics_.count_rejected();
      return Admission::kQueueFull;
    }
    unfinished_ += jobs.size();
    inbox_.push_back({std::move(jobs), std::move(stream), Clock::now()});
  }
  wake_.notify_one();
  return Admission::kAccepted;
}

void EngineService::abort(std::shared_ptr<GenerationStream> stream) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;  // shutdown ends it anyway
    inbox_.push_back({{}, std::move(stream), Clock::now()});
  }
  wake_.notify_one();
}

void EngineService::shutdown(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      stopping_ = true;
      stop_reason_ = reason;
    }
  }
  wake_.notify_one();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void EngineService::run() {
  while (true) {
    std::deque<Message> messages;
    bool stopping = false;
    std::string stop_reason;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !inbox_.empty() || !engine_.is_finished(); });
      messages.swap(inbox_);
      stopping = stopping_;
      stop_reason = stop_reason_;
    }
    try {
      for (Message& message : messages) handle(message);
      if (stopping) {
        fail_everything(stop_reason, 503);
        update_gauges();
        return;
      }
      if (engine_.is_finished()) {
        update_gauges();
        continue;
      }
      StepResult result;
      const int status = 500;  // the errors a step's outputs carry are the server's fault
      try {
        result = engine_.step();
      } catch (const std::exception& error) {
        // The step as a whole failed (device, memory for the batch): every request ends.
        NVLLM_LOG_ERROR("the engine failed: {}", error.what());
        result.finished = engine_.abort_all(fmt::format("the engine failed: {}", error.what()));
      }
      for (RequestOutput& output : result.finished) publish_final(output, status);
      for (auto& [id, tracked] : tracked_) {
        if (const Sequence* seq = engine_.sequence(id)) publish_progress(tracked, *seq);
      }
      update_gauges();
    } catch (const std::exception& error) {
      NVLLM_LOG_ERROR("the engine thread failed: {}", error.what());
      fail_everything(fmt::format("the engine thread failed: {}", error.what()), 500);
      update_gauges();
    }
  }
}

void EngineService::handle(Message& message) {
  if (message.jobs.empty()) {
    abort_stream(message.stream.get(), "the client disconnected");
    return;
  }
  for (size_t choice = 0; choice < message.jobs.size(); ++choice) {
    EngineJob& job = message.jobs[choice];
    Tracked tracked;
    tracked.stream = message.stream;
    tracked.choice = choice;
    tracked.arrival = message.arrival;
    tracked.wants_logprobs = job.params.logprobs.has_value();
    for (const std::string& stop : job.params.stop) {
      tracked.hold_back = std::max(tracked.hold_back, stop.size() - 1);
    }
    metrics_.add_prompt_tokens(static_cast<int64_t>(job.prompt_token_ids.size()));
    const int64_t id = engine_.add_request(std::move(job.prompt_token_ids), job.params);
    tracked_.emplace(id, std::move(tracked));
    ids_of_stream_[message.stream.get()].push_back(id);
  }
}

void EngineService::abort_stream(const GenerationStream* stream, const std::string& reason) {
  const auto it = ids_of_stream_.find(stream);
  if (it == ids_of_stream_.end()) return;
  const std::vector<int64_t> ids = it->second;  // publish_final edits the map
  for (int64_t id : ids) {
    if (std::optional<RequestOutput> output = engine_.abort_request(id, reason)) {
      publish_final(*output, kClientClosedStatus);
    }
  }
}

void EngineService::record_first_tokens(Tracked& tracked, size_t new_tokens) {
  if (new_tokens == 0) return;
  metrics_.add_generation_tokens(static_cast<int64_t>(new_tokens));
  if (tracked.tokens_sent == 0) {
    tracked.first_token = Clock::now();
    metrics_.observe_time_to_first_token(seconds_between(tracked.arrival, tracked.first_token));
  }
}

void EngineService::publish_progress(Tracked& tracked, const Sequence& seq) {
  const std::span<const int> completion = seq.completion_token_ids();
  if (completion.size() <= tracked.tokens_sent) return;
  ChoiceUpdate update;
  update.token_ids.assign(completion.begin() + static_cast<std::ptrdiff_t>(tracked.tokens_sent),
                          completion.end());
  if (tracked.wants_logprobs) update.logprobs = tail_from(seq.logprobs, tracked.tokens_sent);
  // Text a stop string could still claim is held back until the next tokens settle it.
  const size_t safe = seq.text.size() > tracked.hold_back ? seq.text.size() - tracked.hold_back : 0;
  const size_t end = utf8_boundary_at_or_before(seq.text, safe, tracked.text_sent);
  if (end > tracked.text_sent) {
    update.text = seq.text.substr(tracked.text_sent, end - tracked.text_sent);
    tracked.text_sent = end;
  }
  record_first_tokens(tracked, update.token_ids.size());
  tracked.tokens_sent = completion.size();
  tracked.stream->publish(tracked.choice, std::move(update));
}

void EngineService::publish_final(RequestOutput& output, int error_status) {
  const auto it = tracked_.find(output.request_id);
  if (it == tracked_.end()) return;
  Tracked& tracked = it->second;
  const Clock::time_point now = Clock::now();
  ChoiceUpdate update;
  update.finished = true;
  update.num_prompt_tokens = static_cast<int>(output.prompt_token_ids.size());
  update.num_completion_tokens = static_cast<int>(output.token_ids.size());
  if (output.ok()) {
    update.token_ids = tail_from(output.token_ids, tracked.tokens_sent);
    if (output.logprobs) update.logprobs = tail_from(*output.logprobs, tracked.tokens_sent);
    if (output.text.size() > tracked.text_sent) update.text = output.text.substr(tracked.text_sent);
    update.finish_reason = output.finish_reason;
    record_first_tokens(tracked, update.token_ids.size());
    if (output.token_ids.size() > 1) {
      metrics_.observe_time_per_output_token(seconds_between(tracked.first_token, now) /
                                             static_cast<double>(output.token_ids.size() - 1));
    }
    metrics_.observe_finished(output.finish_reason, seconds_between(tracked.arrival, now));
  } else {
    update.error = output.error;
    update.error_status = error_status;
    metrics_.observe_finished(error_status == kClientClosedStatus ? "abort" : "error",
                              seconds_between(tracked.arrival, now));
  }
  tracked.stream->publish(tracked.choice, std::move(update));

  const auto ids = ids_of_stream_.find(tracked.stream.get());
  if (ids != ids_of_stream_.end()) {
    std::erase(ids->second, output.request_id);
    if (ids->second.empty()) ids_of_stream_.erase(ids);
  }
  tracked_.erase(it);
  std::lock_guard lock(mutex_);
  --unfinished_;
}

void EngineService::update_gauges() {
  const Scheduler& scheduler = engine_.scheduler();
  const BlockManager& blocks = scheduler.block_manager();
  EngineGauges gauges;
  gauges.num_running = static_cast<int>(scheduler.running().size());
  gauges.num_waiting = static_cast<int>(scheduler.waiting().size());
  gauges.kv_cache_usage = 1.0 - static_cast<double>(blocks.num_free_blocks()) / blocks.num_blocks();
  gauges.prefix_cache_queries = scheduler.stats().num_prefix_query_tokens;
  gauges.prefix_cache_hits = scheduler.stats().num_prefix_hit_tokens;
  running_.store(static_cast<size_t>(gauges.num_running), std::memory_order_relaxed);
  metrics_.set_gauges(gauges);
}

void EngineService::fail_everything(const std::string& reason, int status) {
  for (RequestOutput& output : engine_.abort_all(reason)) {
    publish_final(output, status);
  }
}

}  // namespace nanovllm
