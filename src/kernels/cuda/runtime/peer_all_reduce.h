// The one-shot all-reduce of small messages over NVLink, for the GPUs of this process: each
// rank writes its tensor into a slot of every rank's inbox (peer-mapped device memory), raises
// a flag in each rank's signal block, waits for every rank's flag, and sums its own inbox. One
// kernel, one hop over NVLink, and no proxy or protocol: a few microseconds where NCCL's ring
// takes ten at a decode step's few kilobytes. It is captured in graphs like any kernel.
//
// Every rank sums the slots in rank order in float32, so every rank ends with the same bits.
// The inboxes and flags are double-buffered by the parity of each block's call count, so a
// rank that runs ahead into the next call never overwrites what a slower one still reads.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace nanovllm::cuda {

class PeerAllReduce {
 public:
  // The most ranks one group serves.
  static constexpr int kMaxRanks = 8;

  // For devices 0 to size - 1, each with an inbox of `max_bytes` a rank. nullptr when some
  // pair of them cannot map each other's memory (no NVLink or PCIe peer access).
  static std::unique_ptr<PeerAllReduce> make(int size, size_t max_bytes);
  ~PeerAllReduce();
  PeerAllReduce(const PeerAllReduce&) = delete;
  PeerAllReduce& operator=(const PeerAllReduce&) = delete;

  int size() const { return size_; }
  size_t max_bytes() const { return max_bytes_; }

  // Whether run() takes x: float32, bfloat16 or float16, contiguous, 16-byte aligned, a
  // multiple of 16 bytes and at most max_bytes().
  bool takes(const Tensor& x) const;

  // x = the sum of every rank's x, enqueued on `stream` of rank `rank`'s device (current on
  // the calling thread). Every rank calls it for the same shape, in the same order.
  void run(int rank, Tensor x, cudaStream_t stream);

  // Lets every run() that waits for a rank, now or later, return without it (its x is then
  // undefined): for a group one of whose ranks failed. Any thread; cannot be undone.
  void abort();

 private:
  struct Device;
  PeerAllReduce(int size, size_t max_bytes);

  int size_;
  size_t max_bytes_;
  std::vector<Device> devices_;      // by rank
  volatile int* aborted_ = nullptr;  // mapped page-locked host memory, read by the kernels
};

}  // namespace nanovllm::cuda
