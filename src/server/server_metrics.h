// What GET /metrics reports, in the Prometheus text format, with vLLM's metric names under the
// "nanovllm:" prefix. The engine thread records; any thread renders.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace nanovllm {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // "name_bucket{labels,le=...} n" lines, then _sum and _count.
  void render(const std::string& name, const std::string& labels, std::string& out) const;

 private:
  std::vector<double> upper_bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

// The engine's state after a step.
struct EngineGauges {
  int num_running = 0;
  int num_waiting = 0;
  double kv_cache_usage = 0;         // fraction of KV blocks held by sequences
  int64_t prefix_cache_queries = 0;  // prompt tokens looked up in the prefix cache
  int64_t prefix_cache_hits = 0;     // of which were found
};

class ServerMetrics {
 public:
  explicit ServerMetrics(std::string model_name);

  void set_gauges(const EngineGauges& gauges);
  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);
  void observe_time_to_first_token(double seconds);
  void observe_time_per_output_token(double seconds);
  // A request that ended: its finish reason ("stop", "length", "abort" or "error").
  void observe_finished(const std::string& reason, double e2e_seconds);
  void count_rejected();  // refused with 503: the queue was full

  std::string render() const;

 private:
  mutable std::mutex mutex_;
  std::string labels_;  // model_name="..."
  EngineGauges gauges_;
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  int64_t finished_stop_ = 0, finished_length_ = 0, finished_abort_ = 0, finished_error_ = 0;
  int64_t rejected_ = 0;
  Histogram time_to_first_token_;
  Histogram time_per_output_token_;
  Histogram e2e_latency_;
};

}  // namespace nanovllm
