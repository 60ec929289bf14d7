// LLM(model, **kwargs): the keyword arguments -> EngineConfig, named as nano-vllm's Config fields
// plus this engine's own.
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "nanovllm/engine_config.h"

namespace nanovllm::python {

// TypeError for an unknown keyword or a value of the wrong type, ValueError (from
// EngineConfig::validate) for a value out of range.
EngineConfig to_engine_config(const nanobind::kwargs& kwargs);

// The keywords with their types and defaults, as in a Python signature: "max_num_seqs: int = 512,
// ...".
std::string engine_config_parameters();

}  // namespace nanovllm::python
