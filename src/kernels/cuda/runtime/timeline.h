// A record of when each CTA of our kernels started, saw its wait for the kernel before end
// (launch.cuh) and finished, in device time (%globaltimer), for builds configured with
// -DNANOVLLM_TIMELINE=ON. It shows where a decode step's time goes between kernels, which
// per-op timings cannot: how early a kernel's CTAs become resident and start their weight
// loads, and how long the chain waits on its slowest CTA. tools/timeline_summary.py reads the
// file. Other builds compile none of it.
#pragma once

#include <cstdint>
#include <string>

namespace nanovllm::cuda::timeline {

// The most marks a kernel may set (NVLLM_TIMELINE_MARK).
inline constexpr int kMarks = 4;

// One CTA of one launch. `grid` is the kernel's %gridid: unique to an eager launch, shared by a
// graph's kernel node over its replays.
struct Record {
  uint64_t grid;
  uint64_t start_ns;
  uint64_t wait_ns;  // 0: the CTA did not wait
  uint64_t end_ns;
  uint32_t cta;               // linear block index
  uint32_t sm;                // %smid
  uint32_t ctas;              // of the launch
  uint32_t threads;           // per CTA
  uint32_t marks_ns[kMarks];  // when the kernel's marks were passed, after start_ns; 0: not
};
static_assert(sizeof(Record) == 64);

// Where a translation unit's kernels write: a ring of `per_sm` records for each SM, and each
// ring's next index (32 words apart, so that the SMs' counters share no cache line).
struct Ring {
  Record* records = nullptr;  // [sms][per_sm]
  unsigned* next = nullptr;   // [sms][32]
  unsigned per_sm = 0;
};

// Each translation unit with instrumented kernels registers how to point them at the ring
// (timeline.cuh does it); returns true.
bool register_unit(void (*attach)(const Ring& ring));

// Allocates rings of `per_sm` records for each SM of the current device and attaches every
// unit.
void start(unsigned per_sm);

// Writes the rings' records to `path`: "NVTL", the record count and kMarks (uint32 each),
// then the records, in no particular order. Does nothing when start() was not called.
void dump(const std::string& path);

}  // namespace nanovllm::cuda::timeline
