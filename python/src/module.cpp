// The native module behind the nanovllm package.
#include <nanobind/nanobind.h>

#include "llm_binding.h"
#include "sampling_params_conversion.h"
#include "tokenizer_binding.h"

namespace nb = nanobind;

NB_MODULE(_core, module) {
  module.doc() = "The C++ engine behind nanovllm: LLM and Tokenizer.";
  nanovllm::python::bind_tokenizer(module);
  nanovllm::python::bind_llm(module);
  module.def(
      "check_sampling_params",
      [](nb::handle params) { nanovllm::python::to_sampling_params(params, "SamplingParams"); },
      nb::arg("params"),
      "Raises TypeError or ValueError when a SamplingParams' fields cannot run (the engine's "
      "own checks).");
  module.def("sampling_params_defaults", &nanovllm::python::sampling_params_defaults,
             "The engine's SamplingParams defaults.");
}
