#include "llm_binding.h"

#include <fmt/format.h>
#include <nanobind/stl/optional.h>

#include <filesystem>
#include <string>

#include "core/check.h"
#include "engine_config_conversion.h"
#include "llm/request_json.h"
#include "progress_bar.h"
#include "py_json.h"
#include "py_values.h"
#include "sampling_params_conversion.h"
#include "signal_poll.h"
#include "tokenizer/tokenizer.h"

namespace nb = nanobind;

namespace nanovllm::python {
namespace {

[[noreturn]] void throw_python_error(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw nb::python_error();
}

std::vector<Prompt> to_prompts(nb::handle prompts) {
  if (!is_list_or_tuple(prompts))
    throw_type_error("prompts", "a list of str or of token-id lists", prompts);
  std::vector<Prompt> parsed;
  parsed.reserve(nb::len(prompts));
  for (nb::handle prompt : prompts) {
    const std::string name = fmt::format("prompts[{}]", parsed.size());
    if (PyUnicode_Check(prompt.ptr())) {
      parsed.push_back(Prompt::from_text(to_string(prompt, name)));
    } else if (is_list_or_tuple(prompt)) {
      parsed.push_back(Prompt::from_token_ids(to_int_list(prompt, name)));
    } else {
      throw_type_error(name, "a str or a list of int token ids", prompt);
    }
  }
  return parsed;
}

// One conversation (a list of message dicts) or a list of them.
std::vector<Prompt> to_chat_prompts(nb::handle messages, nb::handle chat_template_kwargs) {
  if (!is_list_or_tuple(messages))
    throw_type_error("messages", "a list of message dicts or a list of such lists", messages);
  if (nb::len(messages) == 0) throw_value_error("messages is empty");
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  if (!chat_template_kwargs.is_none()) {
    if (!PyDict_Check(chat_template_kwargs.ptr()))
      throw_type_error("chat_template_kwargs", "a dict", chat_template_kwargs);
    kwargs = to_json(chat_template_kwargs, "chat_template_kwargs");
  }
  std::vector<Prompt> parsed;
  if (PyDict_Check(nb::handle(messages)[0].ptr())) {
    parsed.push_back(Prompt::from_messages(to_json(messages, "messages"), kwargs));
    return parsed;
  }
  for (nb::handle conversation : messages) {
    const std::string name = fmt::format("messages[{}]", parsed.size());
    if (!is_list_or_tuple(conversation))
      throw_type_error(name, "a list of message dicts", conversation);
    parsed.push_back(Prompt::from_messages(to_json(conversation, name), kwargs));
  }
  return parsed;
}

// One SamplingParams for every prompt (None: the defaults) or one per prompt.
std::vector<SamplingParams> to_sampling_params_list(nb::handle sampling_params,
                                                    size_t num_prompts) {
  if (sampling_params.is_none()) return {SamplingParams{}};
  const nb::object type = nb::module_::import_("nanovllm.sampling_params").attr("SamplingParams");
  if (nb::isinstance(sampling_params, type))
    return {to_sampling_params(sampling_params, "sampling_params")};
  if (!is_list_or_tuple(sampling_params))
    throw_type_error("sampling_params", "a SamplingParams or a list of them", sampling_params);
  if (nb::len(sampling_params) != num_prompts) {
    throw_value_error(fmt::format(
        "sampling_params has {} entries for {} prompts; give one SamplingParams or one per prompt",
        nb::len(sampling_params), num_prompts));
  }
  std::vector<SamplingParams> params;
  for (nb::handle entry : sampling_params) {
    const std::string name = fmt::format("sampling_params[{}]", params.size());
    if (!nb::isinstance(entry, type)) throw_type_error(name, "a SamplingParams", entry);
    params.push_back(to_sampling_params(entry, name));
  }
  return params;
}

// nano-vllm's output keys ("text", "token_ids") and the rest of `nanovllm generate`'s row.
nb::dict to_output_dict(size_t index, const RequestOutput& output) {
  nb::dict row = nb::borrow<nb::dict>(from_json(output_to_json(index, output)));
  PyDict_DelItemString(row.ptr(), "index");  // the list position says it
  return row;
}

}  // namespace

PyLLM::PyLLM(nb::handle model, const nb::kwargs& kwargs) {
  const std::string path = to_path(model, "model");
  const EngineConfig config = to_engine_config(kwargs);
  if (!std::filesystem::exists(path))
    throw_python_error(PyExc_FileNotFoundError,
                       fmt::format("model directory '{}' does not exist", path));
  if (!std::filesystem::is_directory(path))
    throw_python_error(PyExc_NotADirectoryError,
                       fmt::format("model '{}' is not a directory", path));
  try {
    nb::gil_scoped_release release;  // loading a large checkpoint takes a while
    llm_ = std::make_unique<LLM>(path, config);
  } catch (const Error& error) {
    throw_value_error(fmt::format("cannot load the model from '{}': {}", path, error.what()));
  }
  if (const Tokenizer* tokenizer = llm_->tokenizer()) tokenizer_.emplace(*tokenizer);
}

nb::list PyLLM::generate(nb::handle prompts, nb::handle sampling_params, nb::handle use_tqdm) {
  return run(to_prompts(prompts), sampling_params, "prompts", use_tqdm);
}

nb::list PyLLM::chat(nb::handle messages, nb::handle sampling_params, nb::handle use_tqdm,
                     nb::handle chat_template_kwargs) {
  return run(to_chat_prompts(messages, chat_template_kwargs), sampling_params, "messages",
             use_tqdm);
}

nb::list PyLLM::run(const std::vector<Prompt>& prompts, nb::handle sampling_params,
                    std::string_view prompts_name, nb::handle use_tqdm) {
  const std::vector<SamplingParams> params =
      to_sampling_params_list(sampling_params, prompts.size());
  std::vector<Request> requests;
  requests.reserve(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const SamplingParams& request_params = params.size() == 1 ? params[0] : params[i];
    std::vector<int> ids;
    try {
      ids = llm_->prompt_token_ids(prompts[i]);
    } catch (const Error& error) {
      throw_value_error(fmt::format("{}[{}]: {}", prompts_name, i, error.what()));
    }
    if (std::optional<std::string> problem = llm_->check_request(ids, request_params))
      throw_value_error(fmt::format("{}[{}]: {}", prompts_name, i, *problem));
    requests.push_back({Prompt::from_token_ids(std::move(ids)), request_params, ""});
  }

  ProgressBar progress(use_tqdm, requests.size());
  SignalPoll signal_poll;
  GenerateHooks hooks;
  hooks.on_output = [&progress](size_t, const RequestOutput&) { progress.advance(); };
  hooks.should_stop = [&progress, &signal_poll] {
    std::string reason = progress.stop_reason();
    return reason.empty() ? signal_poll() : reason;
  };
  std::vector<RequestOutput> outputs;
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(generate_mutex_);
    outputs = llm_->generate(requests, progress.engine_line(), hooks);
  }
  progress.finish();
  signal_poll.raise_if_interrupted();

  nb::list result;
  for (size_t i = 0; i < outputs.size(); ++i) result.append(to_output_dict(i, outputs[i]));
  return result;
}

nb::dict PyLLM::last_generate_stats() const {
  const GenerateStats& stats = llm_->last_generate_stats();
  nb::dict dict;
  dict["steps"] = stats.steps;
  dict["prefill_steps"] = stats.prefill_steps;
  dict["prefill_tokens"] = stats.prefill_tokens;
  dict["prefill_seconds"] = stats.prefill_seconds;
  dict["decode_steps"] = stats.decode_steps;
  dict["decode_tokens"] = stats.decode_tokens;
  dict["decode_seconds"] = stats.decode_seconds;
  dict["host_seconds"] = stats.host_seconds;
  dict["seconds"] = stats.seconds;
  return dict;
}

void bind_llm(nb::module_& module) {
  static const std::string init_signature =
      fmt::format("def __init__(self, model: str | os.PathLike[str], *, {}) -> None",
                  engine_config_parameters());
  nb::class_<PyLLM>(module, "LLM",
                    "An offline inference engine over a Hugging Face Qwen3 model directory, with "
                    "nano-vllm's API.")
      .def(
          "__init__",
          [](PyLLM* self, nb::handle model, const nb::kwargs& kwargs) {
            new (self) PyLLM(model, kwargs);
          },
          nb::arg("model"), nb::arg("kwargs"), nb::sig(init_signature.c_str()),
          "Loads the model (config.json, safetensors weights, tokenizer) and sizes the KV "
          "cache.\n\n"
          "The keywords are nano-vllm's Config fields and this engine's (device: 'cpu', 'cuda' or "
          "'auto'; dtype: 'auto', 'bfloat16', 'float16' or 'float32'; load_format: "
          "'safetensors' or 'dummy'). An unknown keyword or a value of the wrong type raises "
          "TypeError, a value out of range ValueError; a missing model directory "
          "FileNotFoundError, and one that cannot be loaded ValueError with the reason.")
      .def("generate", &PyLLM::generate, nb::arg("prompts"),
           nb::arg("sampling_params") = nb::none(), nb::arg("use_tqdm") = true,
           nb::sig(
               "def generate(self, prompts: collections.abc.Sequence[str] | "
               "collections.abc.Sequence[collections.abc.Sequence[int]], "
               "sampling_params: nanovllm.sampling_params.SamplingParams | "
               "collections.abc.Sequence[nanovllm.sampling_params.SamplingParams] | None = None, "
               "use_tqdm: bool | collections.abc.Callable[..., typing.Any] = True) -> "
               "list[dict[str, typing.Any]]"),
           "Generates a completion for every prompt (a str, or a list of token ids) and returns "
           "one dict per prompt, in order: 'text', 'token_ids', 'finish_reason' ('stop' or "
           "'length'), 'prompt_token_ids', and 'logprobs' when asked for; a request that fails "
           "while running (the others complete) comes back as {'error': reason}.\n\n"
           "sampling_params is one SamplingParams for all prompts or one per prompt (None: the "
           "defaults). Every request is checked before any work starts: a bad one raises "
           "TypeError or ValueError naming it (e.g. 'prompts[3]'). use_tqdm=True shows a progress "
           "line with prefill and decode throughput on stderr; a callable (as in vLLM, e.g. "
           "functools.partial(tqdm, leave=False)) makes a bar instead, called with total= and "
           "desc=, whose update(1) runs as each request finishes; an exception it raises stops "
           "generation and is raised. The GIL is released while generating; "
           "Ctrl-C stops generation, frees its KV cache and raises KeyboardInterrupt, and the LLM "
           "stays usable.")
      .def("chat", &PyLLM::chat, nb::arg("messages"), nb::arg("sampling_params") = nb::none(),
           nb::arg("use_tqdm") = true, nb::arg("chat_template_kwargs") = nb::none(),
           nb::sig(
               "def chat(self, messages: collections.abc.Sequence[collections.abc.Mapping[str, "
               "typing.Any]] | "
               "collections.abc.Sequence[collections.abc.Sequence[collections.abc.Mapping[str, "
               "typing.Any]]], "
               "sampling_params: nanovllm.sampling_params.SamplingParams | "
               "collections.abc.Sequence[nanovllm.sampling_params.SamplingParams] | None = None, "
               "use_tqdm: bool | collections.abc.Callable[..., typing.Any] = True, "
               "chat_template_kwargs: collections.abc.Mapping[str, typing.Any] | None = None) -> "
               "list[dict[str, typing.Any]]"),
           "Generates a reply to one conversation (a list of message dicts) or to each of a list "
           "of them: the messages are rendered with the tokenizer's chat template (with the "
           "generation prompt; chat_template_kwargs are template variables such as "
           "enable_thinking). Returns what generate() returns; errors name 'messages[i]'.")
      .def_prop_ro("tokenizer", &PyLLM::tokenizer, nb::rv_policy::reference_internal,
                   "The model's Tokenizer, or None when the directory has no tokenizer.json.")
      .def("get_tokenizer", &PyLLM::tokenizer, nb::rv_policy::reference_internal,
           "The model's Tokenizer (as vLLM's get_tokenizer()), or None.")
      .def("last_generate_stats", &PyLLM::last_generate_stats,
           "What the last generate() or chat() did inside the engine: steps, prefill and decode "
           "steps, tokens and seconds, host seconds, and its wall time in seconds.");
}

}  // namespace nanovllm::python
