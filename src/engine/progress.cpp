#include "engine/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>

namespace nanovllm {
namespace {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long total = std::lround(seconds);
  if (total >= 3600)
    return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
  return fmt::format("{:02}:{:02}", total / 60, total % 60);
}

}  // namespace

std::string format_progress(int done, int total, double elapsed_seconds, double prefill_tok_s,
                            double decode_tok_s) {
  const double remaining = done > 0 ? elapsed_seconds / done * (total - done) : std::nan("");
  return fmt::format("Generating: {}/{} [{}<{}, Prefill={}tok/s, Decode={}tok/s]", done, total,
                     format_duration(elapsed_seconds), format_duration(remaining),
                     static_cast<long>(prefill_tok_s), static_cast<long>(decode_tok_s));
}

ProgressLine::ProgressLine(int total, bool enabled, std::FILE* out)
    : total_(total),
      enabled_(enabled),
      out_(out),
      is_tty_(enabled && isatty(fileno(out)) == 1),
      start_(Clock::now()),
      last_print_(start_) {
  if (enabled_) print(false);
}

ProgressLine::~ProgressLine() {
  close();
}

void ProgressLine::add_step(int finished, int prefill_tokens, int decode_tokens,
                            double step_seconds) {
  if (!enabled_ || closed_) return;
  done_ += finished;
  if (prefill_tokens > 0) {
    window_prefill_tokens_ += prefill_tokens;
    window_prefill_seconds_ += step_seconds;
  }
  if (decode_tokens > 0) {
    window_decode_tokens_ += decode_tokens;
    window_decode_seconds_ += step_seconds;
  }
  const double interval = is_tty_ ? 0.1 : 5.0;
  const double since_print = std::chrono::duration<double>(Clock::now() - last_print_).count();
  if (since_print >= interval) print(false);
}

void ProgressLine::close() {
  if (!enabled_ || closed_) return;
  print(true);
  closed_ = true;
}

void ProgressLine::print(bool final_line) {
  if (window_prefill_seconds_ > 0)
    prefill_tok_s_ = window_prefill_tokens_ / window_prefill_seconds_;
  if (window_decode_seconds_ > 0) decode_tok_s_ = window_decode_tokens_ / window_decode_seconds_;
  window_prefill_tokens_ = window_prefill_seconds_ = 0;
  window_decode_tokens_ = window_decode_seconds_ = 0;
  last_print_ = Clock::now();
  const double elapsed = std::chrono::duration<double>(last_print_ - start_).count();
  const std::string line = format_progress(done_, total_, elapsed, prefill_tok_s_, decode_tok_s_);
  if (is_tty_) {
    // Rewrite the line in place; \x1b[K clears what a longer previous line left behind.
    fmt::print(out_, "\r{}\x1b[K{}", line, final_line ? "\n" : "");
  } else {
    fmt::print(out_, "{}\n", line);
  }
  std::fflush(out_);
}

}  // namespace nanovllm
