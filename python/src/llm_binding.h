// nanovllm.LLM: nano-vllm's offline API over the C++ LLM. Arguments are converted and every
// request is checked (by the C++ validation) before any work starts; generation runs without
// the GIL and stops on Ctrl-C.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "nanovllm/llm.h"
#include "tokenizer_binding.h"

namespace nanovllm::python {

class PyLLM {
 public:
  PyLLM(nanobind::handle model, const nanobind::kwargs& kwargs);

  nanobind::list generate(nanobind::handle prompts, nanobind::handle sampling_params,
                          nanobind::handle use_tqdm);
  nanobind::list chat(nanobind::handle messages, nanobind::handle sampling_params,
                      nanobind::handle use_tqdm, nanobind::handle chat_template_kwargs);
  // None when the model directory has no tokenizer.
  const std::optional<PyTokenizer>& tokenizer() const { return tokenizer_; }
  nanobind::dict last_generate_stats() const;

 private:
  // Encodes and checks every request (ValueError naming `prompts_name`[i] for the first that
  // cannot run), then generates.
  nanobind::list run(const std::vector<Prompt>& prompts, nanobind::handle sampling_params,
                     std::string_view prompts_name, nanobind::handle use_tqdm);

  std::unique_ptr<LLM> llm_;
  std::optional<PyTokenizer> tokenizer_;
  std::mutex generate_mutex_;  // one generate() at a time, whatever thread calls it
};

void bind_llm(nanobind::module_& module);

}  // namespace nanovllm::python
