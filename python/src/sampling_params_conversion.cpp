#include "sampling_params_conversion.h"

#include <fmt/format.h>

#include <string>

#include "core/check.h"
#include "py_values.h"

namespace nb = nanobind;

namespace nanovllm::python {
namespace {

// `stop` may be one string, as in vLLM.
std::vector<std::string> to_stop_strings(nb::handle value, const std::string& name) {
  if (value.is_none()) return {};
  if (PyUnicode_Check(value.ptr())) return {to_string(value, name)};
  if (!is_list_or_tuple(value)) throw_type_error(name, "a str or a list of str", value);
  std::vector<std::string> strings;
  size_t i = 0;
  for (nb::handle item : value)
    strings.push_back(to_string(item, fmt::format("{}[{}]", name, i++)));
  return strings;
}

}  // namespace

SamplingParams to_sampling_params(nb::handle value, std::string_view name) {
  const auto attr = [&](const char* field) -> nb::object { return value.attr(field); };
  const auto label = [&](const char* field) { return fmt::format("{}.{}", name, field); };
  SamplingParams params;
  params.temperature = static_cast<float>(to_double(attr("temperature"), label("temperature")));
  params.max_tokens = to_int(attr("max_tokens"), label("max_tokens"));
  params.ignore_eos = to_bool(attr("ignore_eos"), label("ignore_eos"));
  params.top_k = to_int(attr("top_k"), label("top_k"));
  params.top_p = static_cast<float>(to_double(attr("top_p"), label("top_p")));
  if (nb::object seed = attr("seed"); !seed.is_none()) params.seed = to_uint64(seed, label("seed"));
  params.stop = to_stop_strings(attr("stop"), label("stop"));
  if (nb::object ids = attr("stop_token_ids"); !ids.is_none())
    params.stop_token_ids = to_int_list(ids, label("stop_token_ids"));
  if (nb::object logprobs = attr("logprobs"); !logprobs.is_none())
    params.logprobs = to_int(logprobs, label("logprobs"));
  try {
    params.validate();
  } catch (const Error& error) {
    throw_value_error(fmt::format("{}: {}", name, error.what()));
  }
  return params;
}

nb::dict sampling_params_defaults() {
  const SamplingParams defaults;
  nb::dict dict;
  dict["temperature"] = defaults.temperature;
  dict["max_tokens"] = defaults.max_tokens;
  dict["ignore_eos"] = defaults.ignore_eos;
  dict["top_k"] = defaults.top_k;
  dict["top_p"] = defaults.top_p;
  return dict;
}

}  // namespace nanovllm::python
