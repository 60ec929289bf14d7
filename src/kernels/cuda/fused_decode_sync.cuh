// Synchronization of the persistent decode kernel (fused_decode.h): a ring of shared-memory
// stages that a producer thread fills with bulk copies (the copy engine signals an mbarrier
// per stage) and the consumer warps drain, a named barrier among the consumer warps, and
// tagged words for data between CTAs. Hopper (sm_90) instructions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/l2_hints.cuh"
#include "kernels/cuda/mbarrier.cuh"

namespace nanovllm::cuda::fused {

constexpr int kConsumerWarps = 7;  // with the producer, 2 warps per SM sub-partition (registers)
constexpr int kConsumerThreads = kConsumerWarps * 32;
constexpr int kThreads = kConsumerThreads + 32;  // the last warp produces

// global -> shared by the copy engine; completion counts `bytes` on `barrier`. Addresses and
// size multiples of 16 bytes.
__device__ __forceinline__ void bulk_copy_to_shared(void* destination, const void* source,
                                                    uint32_t bytes, uint64_t* barrier,
                                                    uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
      "[%0], [%1], %2, [%3], %4;\n" ::"r"(shared_address(destination)),
      "l"(source), "r"(bytes), "r"(shared_address(barrier)), "l"(policy)
      : "memory");
}

// Barrier among the consumer warps only (the producer warp runs its own loop).
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerThreads) : "memory");
}

// The stages of the ring as one side sees them: the stage it is at and the parity of the
// barrier phase it waits for. Producer and consumers step through the same sequence of stages.
struct RingCursor {
  int stage = 0;
  uint32_t parity = 0;

  __device__ __forceinline__ void advance(int num_stages) {
    if (++stage == num_stages) {
      stage = 0;
      parity ^= 1;
    }
  }
};

// Shared-memory ring of num_stages stages of stage_bytes; full[s] completes when stage s has
// landed, empty[s] when every consumer warp has released it.
struct WeightRing {
  unsigned char* stages;
  uint64_t* full;
  uint64_t* empty;
  int stage_bytes;
  int num_stages;

  // Producer: copies `bytes` from `source` into the next stage once it is free.
  __device__ __forceinline__ void push(RingCursor& cursor, const void* source, uint32_t bytes,
                                       uint64_t policy) const {
    // A fresh barrier counts as having completed the phase before its first: the first pass
    // over the ring does not wait.
    mbarrier_wait(&empty[cursor.stage], cursor.parity ^ 1);
    mbarrier_arrive_expect_bytes(&full[cursor.stage], bytes);
    bulk_copy_to_shared(stages + static_cast<size_t>(cursor.stage) * stage_bytes, source, bytes,
                        &full[cursor.stage], policy);
    cursor.advance(num_stages);
  }

  // Consumers: the next stage, once it has landed.
  __device__ __forceinline__ const unsigned char* wait(const RingCursor& cursor) const {
    mbarrier_wait(&full[cursor.stage], cursor.parity);
    return stages + static_cast<size_t>(cursor.stage) * stage_bytes;
  }

  // Consumers: this warp is done with the stage (called by every lane).
  __device__ __forceinline__ void release(RingCursor& cursor, int lane) const {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[cursor.stage]);
    cursor.advance(num_stages);
  }
};

// Data between CTAs travels as tagged 64-bit words: 32 bits of payload (two bf16/f16 values,
// or one f32) and the tag of the launch that wrote them, stored and loaded as one access, so
// a reader that sees its launch's tag sees the payload written with it. Every word of a
// launch's buffers is written at most once per launch (each layer has its own), so a reader
// needs no barrier and no fence: it polls the words it needs until they carry its tag.
__device__ __forceinline__ void store_tagged(uint64_t* word, uint32_t payload, uint32_t tag) {
  const uint64_t value = (static_cast<uint64_t>(tag) << 32) | payload;
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" ::"l"(word), "l"(value) : "memory");
}
__device__ __forceinline__ uint64_t load_word(const uint64_t* word) {
  uint64_t value;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n" : "=l"(value) : "l"(word) : "memory");
  return value;
}
__device__ __forceinline__ bool has_tag(uint64_t value, uint32_t tag) {
  return static_cast<uint32_t>(value >> 32) == tag;
}

// The payloads of words index(0), index(1), ... index(count - 1), once tagged, to
// take(i, payload); spread over the consumer threads, each with up to kBatch loads in flight.
// Every round re-reads all of a thread's words still pending at once, so a batch costs one
// round trip per wave of arrivals, not one per word.
template <int kBatch = 8, typename Index, typename Take>
__device__ __forceinline__ void take_tagged(int count, uint32_t tag, Index&& index, Take&& take) {
  for (int first = static_cast<int>(threadIdx.x); first < count;
       first += kBatch * kConsumerThreads) {
    uint64_t value[kBatch];
    unsigned pending = 0;  // bit j: word first + j * kConsumerThreads not yet tagged
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = first + j * kConsumerThreads;
      if (i < count) {
        value[j] = load_word(index(i));
        pending |= 1u << j;
      }
    }
    while (pending != 0) {
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if ((pending >> j & 1u) == 0 || !has_tag(value[j], tag)) continue;
        take(first + j * kConsumerThreads, static_cast<uint32_t>(value[j]));
        pending &= ~(1u << j);
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (pending >> j & 1u) value[j] = load_word(index(first + j * kConsumerThreads));
      }
    }
  }
}

// The optional timeline of fused_decode.h: stamps of one CTA's thread 0, nothing elsewhere.
struct PhaseClock {
  uint64_t* entries = nullptr;  // this CTA's entries of the current layer; null: not recorded

  __device__ __forceinline__ static uint64_t now() {
    uint64_t ns;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(ns));
    return ns;
  }
  __device__ __forceinline__ void stamp(int event) const {
    if (entries != nullptr) entries[event] = now();
  }
  __device__ __forceinline__ void add(int event, uint64_t ns) const {
    if (entries != nullptr) entries[event] += ns;
  }
};

// 16 bytes from global memory through L2 only, where L1 would keep nothing useful.
__device__ __forceinline__ uint4 load_l2(const void* address) {
  return __ldcg(static_cast<const uint4*>(address));
}

}  // namespace nanovllm::cuda::fused
