#include "progress_bar.h"

#include <nanobind/stl/string.h>

#include "py_values.h"

namespace nb = nanobind;

namespace nanovllm::python {

ProgressBar::ProgressBar(nb::handle use_tqdm, size_t total) {
  if (PyBool_Check(use_tqdm.ptr())) {
    engine_line_ = use_tqdm.ptr() == Py_True;
    return;
  }
  if (!PyCallable_Check(use_tqdm.ptr())) {
    throw_type_error("use_tqdm", "a bool or a callable that makes a progress bar", use_tqdm);
  }
  bar_ = use_tqdm(nb::arg("total") = total, nb::arg("desc") = "Processed prompts");
}

void ProgressBar::advance() {
  if (!bar_.is_valid() || error_) return;
  nb::gil_scoped_acquire gil;
  try {
    bar_.attr("update")(1);
  } catch (nb::python_error& error) {
    error_.emplace(std::move(error));
  }
}

std::string ProgressBar::stop_reason() const {
  if (!error_) return {};
  nb::gil_scoped_acquire gil;
  return "interrupted by " + nb::cast<std::string>(error_->type().attr("__name__")) +
         " from the progress bar";
}

void ProgressBar::finish() {
  if (bar_.is_valid() && nb::hasattr(bar_, "close")) {
    try {
      bar_.attr("close")();
    } catch (nb::python_error& error) {
      if (!error_) error_.emplace(std::move(error));
    }
  }
  if (!error_) return;
  nb::python_error error = std::move(*error_);
  error_.reset();
  throw error;
}

}  // namespace nanovllm::python
