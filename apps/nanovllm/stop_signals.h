// SIGINT and SIGTERM as a request to stop cleanly: while a StopSignals lives, such a signal
// only sets a flag (nothing else is safe in a handler), which the work in progress polls.
#pragma once

#include <signal.h>

#include <string>

namespace nanovllm {

class StopSignals {
 public:
  // Installs the handlers; the destructor puts the previous ones back.
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The last signal received (SIGINT or SIGTERM), or 0.
  int received() const;
  // "interrupted by SIGINT", or "" while no signal came.
  std::string reason() const;

 private:
  struct sigaction previous_interrupt_ {};
  struct sigaction previous_terminate_ {};
};

}  // namespace nanovllm
