// The engine on its own thread. HTTP handlers submit requests and aborts through a thread-safe
// inbox; the engine thread alone calls the engine (add, step, abort) and hands each request's
// progress to its GenerationStream. At most max_pending_requests requests wait for a place in
// the running batch; past that submit() refuses at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "nanovllm/sampling_params.h"
#include "server/generation_stream.h"
#include "server/server_metrics.h"

namespace nanovllm {

class LLMEngine;
struct RequestOutput;
struct Sequence;

// One choice of a call: what the engine runs.
struct EngineJob {
  std::vector<int> prompt_token_ids;
  SamplingParams params;
};

class EngineService {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Admission { kAccepted, kQueueFull, kShuttingDown };

  // Starts the engine thread. `engine` must outlive the service and be used by nobody else.
  EngineService(LLMEngine& engine, ServerMetrics& metrics, size_t max_pending_requests);
  ~EngineService();  // shutdown("the server stopped") if not done yet
  EngineService(const EngineService&) = delete;
  EngineService& operator=(const EngineService&) = delete;

  size_t max_pending_requests() const { return max_pending_requests_; }

  // Queues one engine request per job; job i reports to choice i of `stream`. Thread-safe.
  Admission submit(std::vector<EngineJob> jobs, std::shared_ptr<GenerationStream> stream);
  // Ends the stream's requests before the next engine step and frees their KV blocks (their
  // client is gone). Thread-safe; a no-op for streams already finished.
  void abort(std::shared_ptr<GenerationStream> stream);
  // Refuses new requests, ends every unfinished one with `reason` (HTTP status 503) and stops
  // the engine thread. Thread-safe; idempotent.
  void shutdown(const std::string& reason);

 private:
  struct Message {
    std::vector<EngineJob> jobs;  // empty: an abort
    std::shared_ptr<GenerationStream> stream;
    Clock::time_point arrival;
  };
  // An engine request in flight and what its client has been sent.
  struct Tracked {
    std::shared_ptr<GenerationStream> stream;
    size_t choice = 0;
    size_t tokens_sent = 0;
    size_t text_sent = 0;
    size_t hold_back = 0;  // bytes a stop string could still claim: the longest one, minus 1
    bool wants_logprobs = false;
    Clock::time_point arrival;
    Clock::time_point first_token;
  };

  void run();
  void handle(Message& message);
  void add_jobs(Message& message);
  void abort_stream(const GenerationStream* stream, const std::string& reason);
  // The tokens and text a running request produced since the last update, if any.
  void publish_progress(Tracked& tracked, const Sequence& seq);
  // The request's last update; forgets it.
  void publish_final(RequestOutput& output, int error_status);
  void record_first_tokens(Tracked& tracked, size_t new_tokens);
  void update_gauges();
  void fail_everything(const std::string& reason, int status);

  LLMEngine& engine_;
  ServerMetrics& metrics_;
  const size_t max_pending_requests_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Message> inbox_;
  bool stopping_ = false;
  std::string stop_reason_;
  size_t unfinished_ = 0;           // accepted, not yet ended (guarded by mutex_)
  std::atomic<size_t> running_{0};  // in the running batch after the last step

  // Engine thread only.
  std::unordered_map<int64_t, Tracked> tracked_;
  std::unordered_map<const GenerationStream*, std::vector<int64_t>> ids_of_stream_;
  std::thread thread_;
};

}  // namespace nanovllm
