// Lets Ctrl-C stop a generate() that runs without the GIL. Polled between engine steps, it
// briefly takes the GIL and runs Python's pending signal handlers; when one raises (SIGINT's
// raises KeyboardInterrupt) the exception is kept and generate() is asked to stop, and the
// exception is raised once generate() has returned.
#pragma once

#include <nanobind/nanobind.h>

#include <chrono>
#include <optional>
#include <string>

namespace nanovllm::python {

class SignalPoll {
 public:
  // Called without the GIL. Returns why generate() must stop, or "" to go on. Checks at most
  // every kInterval, so that a step never waits long for a GIL another thread holds.
  std::string operator()();

  // Called with the GIL after generate() returned: raises the kept exception, if any.
  void raise_if_interrupted();

  static constexpr std::chrono::milliseconds kInterval{20};

 private:
  std::chrono::steady_clock::time_point last_check_{};
  std::optional<nanobind::python_error> error_;
};

}  // namespace nanovllm::python
