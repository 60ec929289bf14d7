#include "kernels/cuda/runtime/stream_tickets.h"

#include <algorithm>

#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm::cuda {

StreamTickets::~StreamTickets() {
  for (cudaEvent_t event : events_) {
    if (event != nullptr) (void)cudaEventDestroy(event);
  }
}

uint64_t StreamTickets::record(cudaStream_t stream) {
  const uint64_t ticket = ++last_;
  cudaEvent_t& event = events_[ticket % events_.size()];
  if (event == nullptr) NVLLM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  NVLLM_CUDA_CHECK(cudaEventRecord(event, stream));
  return ticket;
}

void StreamTickets::wait(uint64_t ticket) {
  if (ticket <= done_) return;
  NVLLM_CHECK_LE(ticket, last_);
  NVLLM_CUDA_CHECK(cudaEventSynchronize(events_[ticket % events_.size()]));
  done_ = std::max(done_, ticket);
}

}  // namespace nanovllm::cuda
