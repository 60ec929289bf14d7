// The generate() progress line: requests done and prefill / decode throughput, as nano-vllm's
// tqdm bar shows them. On a terminal one line is rewritten in place (at most every 0.1 s);
// otherwise a plain line is written every few seconds.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace nanovllm {

// "Generating: 95/256 [00:12<00:20, Prefill=12345tok/s, Decode=6789tok/s]"
std::string format_progress(int done, int total, double elapsed_seconds, double prefill_tok_s,
                            double decode_tok_s);

class ProgressLine {
 public:
  // Writes nothing when disabled.
  ProgressLine(int total, bool enabled, std::FILE* out = stderr);
  ~ProgressLine();

  // One engine step: requests it finished, tokens it prefilled or decoded, its duration.
  void add_step(int finished, int prefill_tokens, int decode_tokens, double step_seconds);
  // The final line (ends the rewritten line with a newline).
  void close();

 private:
  void print(bool final_line);

  using Clock = std::chrono::steady_clock;
  int total_;
  bool enabled_;
  std::FILE* out_;
  bool is_tty_;
  bool closed_ = false;
  int done_ = 0;
  Clock::time_point start_;
  Clock::time_point last_print_;
  // Throughput over the steps since the last print (the last value is kept when a window has
  // no step of a kind).
  double window_prefill_tokens_ = 0, window_prefill_seconds_ = 0;
  double window_decode_tokens_ = 0, window_decode_seconds_ = 0;
  double prefill_tok_s_ = 0, decode_tok_s_ = 0;
};

}  // namespace nanovllm
