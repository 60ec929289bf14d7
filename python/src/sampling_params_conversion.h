// nanovllm.SamplingParams (a Python dataclass) -> the C++ SamplingParams, which validates it.
#pragma once

#include <nanobind/nanobind.h>

#include <string_view>

#include "nanovllm/sampling_params.h"

namespace nanovllm::python {

// Reads the dataclass's fields with type checks, then runs SamplingParams::validate(); errors
// (TypeError, ValueError) start with `name`, e.g. "sampling_params[3]".
SamplingParams to_sampling_params(nanobind::handle value, std::string_view name);

// The C++ defaults of the fields nano-vllm and this engine share, for the dataclass.
nanobind::dict sampling_params_defaults();

}  // namespace nanovllm::python
