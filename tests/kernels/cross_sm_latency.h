// How long one CTA's store takes to reach another CTA polling for it (what each phase of the
// fused decode kernel waits for, hop by hop), and the SM clock it runs at.
#pragma once

#include <cuda_runtime.h>

namespace nanovllm::bench {

struct CrossSmLatency {
  double round_trip_ns = 0.0;  // a word there and an answer back, two CTAs on two SMs
  double sm_clock_ghz = 0.0;   // clock64 ticks per global-timer nanosecond meanwhile
};

CrossSmLatency cross_sm_latency(cudaStream_t stream);

}  // namespace nanovllm::bench
