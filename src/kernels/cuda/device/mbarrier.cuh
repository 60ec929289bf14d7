// Shared-memory barriers (mbarrier) and the cluster's remote stores that signal them, Hopper
// (sm_90) instructions shared by the kernels that hand data between CTAs of a cluster or
// wait for bulk copies.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace nanovllm::cuda {

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* barrier, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)),
               "r"(count)
               : "memory");
}

// Makes initialized mbarriers visible to the copy engine and the other threads of the cluster
// (before a CTA-wide or cluster-wide barrier).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier))
               : "memory");
}

// Arrives and tells the barrier that `bytes` more will land through copies signalling it.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint64_t* barrier, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)),
      "r"(bytes)
      : "memory");
}

// Waits until the barrier's phase of parity `parity` has completed; what other CTAs of the
// cluster stored with push_to_rank() signalling it is then visible.
__device__ __forceinline__ void mbarrier_wait(uint64_t* barrier, uint32_t parity) {
  const uint32_t address = shared_address(barrier);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(address), "r"(parity)
        : "memory");
  } while (!done);
}

// The cluster-wide barrier in two halves: every thread of every CTA arrives, then waits.
// Arriving releases what the thread wrote before (an initialized mbarrier included).
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

// The address of `local`'s counterpart in the shared memory of the cluster's CTA `rank`.
__device__ __forceinline__ uint32_t cluster_address(const void* local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(shared_address(local)), "r"(rank));
  return remote;
}

// Stores into another CTA's shared memory (addresses from cluster_address()) and counts the
// bytes on its mbarrier, which completes once all it expects have landed.
__device__ __forceinline__ void push_to_rank(uint32_t remote, float value,
                                             uint32_t remote_barrier) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(remote),
      "r"(__float_as_uint(value)), "r"(remote_barrier)
      : "memory");
}
__device__ __forceinline__ void push_to_rank(uint32_t remote, float2 value,
                                             uint32_t remote_barrier) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];\n" ::"r"(
          remote),
      "r"(__float_as_uint(value.x)), "r"(__float_as_uint(value.y)), "r"(remote_barrier)
      : "memory");
}

}  // namespace nanovllm::cuda
