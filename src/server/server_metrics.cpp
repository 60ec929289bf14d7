#include "server/server_metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace nanovllm {

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t bucket =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& labels, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    cumulative += counts_[i];
    out +=
        fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, upper_bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, count_);
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, sum_);
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
}

namespace {

// Prometheus label values escape backslash, double quote and newline.
std::string escape_label(const std::string& value) {
  std::string escaped;
  for (char c : value) {
    if (c == '\\' || c == '"') escaped += '\\';
    escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return escaped;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

// Buckets as vLLM's.
ServerMetrics::ServerMetrics(std::string model_name)
    : labels_(fmt::format("model_name=\"{}\"", escape_label(model_name))),
      time_to_first_token_({0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                            0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                            20.0,  40.0,  80.0, 160.0, 640.0, 2560.0}),
      time_per_output_token_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                              2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      e2e_latency_({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}) {}

void ServerMetrics::set_gauges(const EngineGauges& gauges) {
  std::lock_guard lock(mutex_);
  gauges_ = gauges;
}

void ServerMetrics::add_prompt_tokens(int64_t n) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += n;
}

void ServerMetrics::add_generation_tokens(int64_t n) {
  std::lock_guard lock(mutex_);
  generation_tokens_ += n;
}

void ServerMetrics::observe_time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  time_to_first_token_.observe(seconds);
}

void ServerMetrics::observe_time_per_output_token(double seconds) {
  std::lock_guard lock(mutex_);
  time_per_output_token_.observe(seconds);
}

void ServerMetrics::observe_finished(const std::string& reason, double e2e_seconds) {
  std::lock_guard lock(mutex_);
  if (reason == "stop") {
    ++finished_stop_;
  } else if (reason == "length") {
    ++finished_length_;
  } else if (reason == "abort") {
    ++finished_abort_;
  } else {
    ++finished_error_;
  }
  e2e_latency_.observe(e2e_seconds);
}

void ServerMetrics::count_rejected() {
  std::lock_guard lock(mutex_);
  ++rejected_;
}

std::string ServerMetrics::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  const auto gauge = [&](const char* name, const char* help, double value) {
    header(out, name, "gauge", help);
    out += fmt::format("{}{{{}}} {}\n", name, labels_, value);
  };
  const auto counter = [&](const char* name, const char* help, int64_t value) {
    header(out, name, "counter", help);
    out += fmt::format("{}{{{}}} {}\n", name, labels_, value);
  };
  gauge("nanovllm:num_requests_running", "Requests in the running batch.", gauges_.num_running);
  gauge("nanovllm:num_requests_waiting", "Requests waiting to be scheduled.", gauges_.num_waiting);
  gauge("nanovllm:kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).",
        gauges_.kv_cache_usage);
  counter("nanovllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
          gauges_.prefix_cache_queries);
  counter("nanovllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
          gauges_.prefix_cache_hits);
  gauge("nanovllm:prefix_cache_hit_rate",
        "Prefix cache hits over queries, in tokens (0 before any).",
        gauges_.prefix_cache_queries > 0
            ? static_cast<double>(gauges_.prefix_cache_hits) / gauges_.prefix_cache_queries
            : 0.0);
  counter("nanovllm:prompt_tokens_total", "Prompt tokens of accepted requests.", prompt_tokens_);
  counter("nanovllm:generation_tokens_total", "Generated tokens.", generation_tokens_);
  header(out, "nanovllm:request_success_total", "counter", "Requests that ended, by reason.");
  for (const auto& [reason, count] :
       {std::pair{"stop", finished_stop_}, std::pair{"length", finished_length_},
        std::pair{"abort", finished_abort_}, std::pair{"error", finished_error_}}) {
    out += fmt::format("nanovllm:request_success_total{{{},finished_reason=\"{}\"}} {}\n", labels_,
                       reason, count);
  }
  counter("nanovllm:request_rejected_total",
          "Requests refused with 503 because --max-pending-requests were waiting.", rejected_);
  header(out, "nanovllm:time_to_first_token_seconds", "histogram",
         "From arrival to the first generated token.");
  time_to_first_token_.render("nanovllm:time_to_first_token_seconds", labels_, out);
  header(out, "nanovllm:time_per_output_token_seconds", "histogram",
         "Mean time between generated tokens of a request, after the first.");
  time_per_output_token_.render("nanovllm:time_per_output_token_seconds", labels_, out);
  header(out, "nanovllm:e2e_request_latency_seconds", "histogram",
         "From arrival to the last token (or the end of the request).");
  e2e_latency_.render("nanovllm:e2e_request_latency_seconds", labels_, out);
  return out;
}

}  // namespace nanovllm
