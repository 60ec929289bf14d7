#include "signal_poll.h"

#include <nanobind/stl/string.h>

namespace nb = nanobind;

namespace nanovllm::python {

std::string SignalPoll::operator()() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_check_ < kInterval) return {};
  last_check_ = now;
  nb::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return {};
  error_.emplace();  // takes the exception out of the interpreter's error state
  return "interrupted by " + nb::cast<std::string>(error_->type().attr("__name__"));
}

void SignalPoll::raise_if_interrupted() {
  if (!error_) return;
  nb::python_error error = std::move(*error_);
  error_.reset();
  throw error;
}

}  // namespace nanovllm::python
