// What one generate() call did, step by step: how the time split between prefill and decode,
// how large the decode batches were, and how much of each step the host spent on its own work.
#pragma once

#include <cstdint>

namespace nanovllm {

struct GenerateStats {
  int64_t steps = 0;  // steps that ran a batch
  int64_t prefill_steps = 0;
  int64_t prefill_tokens = 0;  // prompt tokens computed (prefix-cache hits are not computed)
  double prefill_seconds = 0;
  int64_t decode_steps = 0;
  int64_t decode_tokens = 0;  // the decode batch sizes summed: one token per sequence per step
  double decode_seconds = 0;
  // Step wall time minus the time the executor blocked waiting for the device: the host's share.
  double host_seconds = 0;
  double device_wait_seconds = 0;
  double seconds = 0;  // the whole call, wall clock

  double mean_decode_batch_size() const {
    return decode_steps > 0 ? static_cast<double>(decode_tokens) / decode_steps : 0.0;
  }
  double host_ms_per_step() const { return steps > 0 ? 1e3 * host_seconds / steps : 0.0; }
};

}  // namespace nanovllm
