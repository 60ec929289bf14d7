// One rank's view of a tensor-parallel group: the collectives the sharded model needs. Every
// rank calls the same collectives in the same order, each from the thread that drives its own
// device. The CPU backend uses the in-process group (in_process_group.h), the CUDA backend NCCL.
#pragma once

#include <string>

#include "core/tensor.h"

namespace nanovllm {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // x = the sum over the ranks of x, in place; the same shape and dtype on every rank.
  // `stream` is the device stream to order it on (cudaStream_t; ignored on the CPU).
  virtual void all_reduce_sum(Tensor x, void* stream) = 0;
  // out [R, size * C] = every rank's x [R, C], side by side in rank order, on every rank.
  virtual void all_gather_columns(const Tensor& x, Tensor out, void* stream) = 0;

  // Ends every collective in progress or to come on every rank with an Error naming `reason`
  // (a rank failed or hung). Thread-safe; the first reason sticks.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace nanovllm
