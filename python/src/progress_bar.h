// generate()'s use_tqdm, as vLLM takes it: a bool (the engine's own progress line on stderr, or
// none), or a callable that makes a tqdm-like bar, called as use_tqdm(total=N,
// desc="Processed prompts"), whose update(1) runs as each request finishes and close() at the
// end. An exception from the bar (Ctrl-C while it runs included) stops generate() within a step
// and is raised once generate() has returned, as a signal's is.
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <optional>
#include <string>

namespace nanovllm::python {

class ProgressBar {
 public:
  // TypeError unless `use_tqdm` is a bool or a callable. With the GIL.
  ProgressBar(nanobind::handle use_tqdm, size_t total);

  // Whether the engine prints its own progress line.
  bool engine_line() const { return engine_line_; }
  // As each request finishes, on generate()'s thread, without the GIL.
  void advance();
  // Why generate() must stop ("" to go on): the bar raised. Without the GIL.
  std::string stop_reason() const;
  // With the GIL, after generate(): closes the bar and raises what it raised, if anything.
  void finish();

 private:
  nanobind::object bar_;
  bool engine_line_ = false;
  std::optional<nanobind::python_error> error_;
};

}  // namespace nanovllm::python
