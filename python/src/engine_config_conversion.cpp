#include "engine_config_conversion.h"

#include <fmt/format.h>
#include <nanobind/stl/string.h>

#include <variant>

#include "core/check.h"
#include "py_values.h"

namespace nb = nanobind;

namespace nanovllm::python {
namespace {

using Field = std::variant<int EngineConfig::*, float EngineConfig::*, bool EngineConfig::*,
                           std::string EngineConfig::*, uint64_t EngineConfig::*>;

struct Keyword {
  const char* name;
  Field field;
};

// nano-vllm's Config fields in its order, then this engine's.
const Keyword kKeywords[] = {
    {"max_num_batched_tokens", &EngineConfig::max_num_batched_tokens},
    {"max_num_seqs", &EngineConfig::max_num_seqs},
    {"max_model_len", &EngineConfig::max_model_len},
    {"gpu_memory_utilization", &EngineConfig::gpu_memory_utilization},
    {"tensor_parallel_size", &EngineConfig::tensor_parallel_size},
    {"enforce_eager", &EngineConfig::enforce_eager},
    {"kvcache_block_size", &EngineConfig::kvcache_block_size},
    {"num_kvcache_blocks", &EngineConfig::num_kvcache_blocks},
    {"device", &EngineConfig::device},
    {"dtype", &EngineConfig::dtype},
    {"enable_prefix_caching", &EngineConfig::enable_prefix_caching},
    {"seed", &EngineConfig::seed},
    {"load_format", &EngineConfig::load_format},
    {"async_scheduling", &EngineConfig::async_scheduling},
};

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

void set_field(EngineConfig& config, const Keyword& keyword, nb::handle value) {
  const std::string name = keyword.name;
  std::visit(Overloaded{
                 [&](int EngineConfig::*field) { config.*field = to_int(value, name); },
                 [&](float EngineConfig::*field) {
                   config.*field = static_cast<float>(to_double(value, name));
                 },
                 [&](bool EngineConfig::*field) { config.*field = to_bool(value, name); },
                 [&](std::string EngineConfig::*field) { config.*field = to_string(value, name); },
                 [&](uint64_t EngineConfig::*field) { config.*field = to_uint64(value, name); },
             },
             keyword.field);
}

std::string parameter(const EngineConfig& defaults, const Keyword& keyword) {
  return std::visit(Overloaded{
                        [&](int EngineConfig::*field) {
                          return fmt::format("{}: int = {}", keyword.name, defaults.*field);
                        },
                        [&](float EngineConfig::*field) {
                          return fmt::format("{}: float = {}", keyword.name, defaults.*field);
                        },
                        [&](bool EngineConfig::*field) {
                          return fmt::format("{}: bool = {}", keyword.name,
                                             defaults.*field ? "True" : "False");
                        },
                        [&](std::string EngineConfig::*field) {
                          return fmt::format("{}: str = '{}'", keyword.name, defaults.*field);
                        },
                        [&](uint64_t EngineConfig::*field) {
                          return fmt::format("{}: int = {}", keyword.name, defaults.*field);
                        },
                    },
                    keyword.field);
}

}  // namespace

EngineConfig to_engine_config(const nb::kwargs& kwargs) {
  EngineConfig config;
  for (auto [key, value] : kwargs) {
    const std::string name = nb::cast<std::string>(key);
    const Keyword* keyword = nullptr;
    for (const Keyword& candidate : kKeywords) {
      if (name == candidate.name) keyword = &candidate;
    }
    if (keyword == nullptr) {
      throw nb::type_error(
          fmt::format("LLM() got an unexpected keyword argument '{}'", name).c_str());
    }
    set_field(config, *keyword, value);
  }
  try {
    config.validate();
  } catch (const Error& error) {
    throw_value_error(error.what());
  }
  return config;
}

std::string engine_config_parameters() {
  const EngineConfig defaults;
  std::string parameters;
  for (const Keyword& keyword : kKeywords) {
    if (!parameters.empty()) parameters += ", ";
    parameters += parameter(defaults, keyword);
  }
  return parameters;
}

}  // namespace nanovllm::python
