// Device side of timeline.h: NVLLM_TIMELINE_SCOPE() at the top of a kernel records its CTA
// (thread 0's view: entry, the end of wait_for_prior_kernels(), exit) into the ring, with the
// times at which thread 0 passed the kernel's NVLLM_TIMELINE_MARK(i) (i < kMarks). Without
// NANOVLLM_TIMELINE the macros are empty and nothing here is compiled.
#pragma once

#ifdef NANOVLLM_TIMELINE
#include <cuda_runtime.h>

#include "kernels/cuda/runtime/cuda_check.h"
#include "kernels/cuda/runtime/timeline.h"

namespace nanovllm::cuda::timeline {

// One per translation unit (static): kernels are compiled without relocatable device code,
// so each unit has its own copy, set by attach_unit() below.
static __device__ Ring device_ring;

static void attach_unit(const Ring& ring) {
  NVLLM_CUDA_CHECK(cudaMemcpyToSymbol(device_ring, &ring, sizeof ring));
}
static const bool unit_registered = register_unit(&attach_unit);

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

__device__ __forceinline__ bool is_first_thread() {
  return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
}

// The CTA's wait stamp, written by its first thread in wait_for_prior_kernels().
__device__ __forceinline__ uint64_t& wait_stamp() {
  __shared__ uint64_t stamp;
  return stamp;
}

// The CTA's mark stamps, likewise.
__device__ __forceinline__ uint64_t* mark_stamps() {
  __shared__ uint64_t stamps[kMarks];
  return stamps;
}

// Launches of more CTAs (the LM head's GEMV) keep only every 64th past the first 2,048, so a
// step's records stay few.
__device__ __forceinline__ bool recorded(uint32_t cta) {
  return cta < 2048 || cta % 64 == 0;
}

__device__ __forceinline__ uint32_t linear_cta() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}

// The slot is taken at the start, so that the atomic's round trip overlaps the CTA's work
// rather than delaying its exit; each SM counts on its own counter, so they do not contend.
struct Scope {
  uint64_t start = 0;
  uint32_t sm = 0;
  uint32_t slot = 0;
  bool records = false;
  __device__ Scope() {
    if (!is_first_thread()) return;
    start = now_ns();
    wait_stamp() = 0;
    for (int i = 0; i < kMarks; ++i) mark_stamps()[i] = 0;
    records = device_ring.records != nullptr && recorded(linear_cta());
    if (!records) return;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    slot = atomicAdd(device_ring.next + sm * 32, 1u) % device_ring.per_sm;
  }
  __device__ ~Scope() {
    if (!records) return;
    Record record;
    record.end_ns = now_ns();
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(record.grid));
    record.start_ns = start;
    record.wait_ns = wait_stamp();
    record.cta = linear_cta();
    record.sm = sm;
    record.ctas = gridDim.x * gridDim.y * gridDim.z;
    record.threads = blockDim.x * blockDim.y * blockDim.z;
    for (int i = 0; i < kMarks; ++i) {
      const uint64_t mark = mark_stamps()[i];
      record.marks_ns[i] = mark != 0 ? static_cast<uint32_t>(mark - start) : 0;
    }
    device_ring.records[static_cast<size_t>(sm) * device_ring.per_sm + slot] = record;
  }
};

}  // namespace nanovllm::cuda::timeline

#define NVLLM_TIMELINE_SCOPE() const ::nanovllm::cuda::timeline::Scope timeline_scope
#define NVLLM_TIMELINE_WAITED()                                                        \
  do {                                                                                 \
    if (::nanovllm::cuda::timeline::is_first_thread()) {                               \
      ::nanovllm::cuda::timeline::wait_stamp() = ::nanovllm::cuda::timeline::now_ns(); \
    }                                                                                  \
  } while (0)
#define NVLLM_TIMELINE_MARK(i)                                                             \
  do {                                                                                     \
    if (::nanovllm::cuda::timeline::is_first_thread()) {                                   \
      ::nanovllm::cuda::timeline::mark_stamps()[i] = ::nanovllm::cuda::timeline::now_ns(); \
    }                                                                                      \
  } while (0)
#else
#define NVLLM_TIMELINE_MARK(i) \
  do {                         \
  } while (0)
#define NVLLM_TIMELINE_SCOPE() \
  do {                         \
  } while (0)
#define NVLLM_TIMELINE_WAITED() \
  do {                          \
  } while (0)
#endif
