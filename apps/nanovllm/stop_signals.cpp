#include "nanovllm/stop_signals.h"

#include <atomic>

namespace nanovllm {
namespace {

std::atomic<int> received_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler must not take a lock");

extern "C" void record_signal(int signal) {
  received_signal.store(signal, std::memory_order_relaxed);
}

}  // namespace

StopSignals::StopSignals() {
  received_signal.store(0, std::memory_order_relaxed);
  struct sigaction action {};
  action.sa_handler = record_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // writes of finished rows go on undisturbed
  sigaction(SIGINT, &action, &previous_interrupt_);
  sigaction(SIGTERM, &action, &previous_terminate_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &previous_interrupt_, nullptr);
  sigaction(SIGTERM, &previous_terminate_, nullptr);
}

int StopSignals::received() const {
  return received_signal.load(std::memory_order_relaxed);
}

std::string StopSignals::reason() const {
  switch (received()) {
    case 0:
      return "";
    case SIGINT:
      return "interrupted by SIGINT";
    case SIGTERM:
      return "interrupted by SIGTERM";
    default:
      return "interrupted by signal " + std::to_string(received());
  }
}

}  // namespace nanovllm
