// Points in a stream's work that the host can wait for: record() returns a ticket for the work
// enqueued so far, wait() blocks until that work is done. Tickets count up from 1 (0 is always
// done); their events are reused round robin, and a ticket whose event has since been recorded
// again is waited for through the later one, since a stream's work completes in order.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>

namespace nanovllm::cuda {

class StreamTickets {
 public:
  StreamTickets() = default;
  ~StreamTickets();
  StreamTickets(const StreamTickets&) = delete;
  StreamTickets& operator=(const StreamTickets&) = delete;

  uint64_t record(cudaStream_t stream);
  void wait(uint64_t ticket);

 private:
  std::array<cudaEvent_t, 8> events_{};
  uint64_t last_ = 0;
  uint64_t done_ = 0;  // tickets up to this one are known to be done
};

}  // namespace nanovllm::cuda
