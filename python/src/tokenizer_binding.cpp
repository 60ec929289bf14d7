#include "tokenizer_binding.h"

#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <filesystem>

#include "core/check.h"
#include "py_json.h"
#include "py_values.h"

namespace nb = nanobind;

namespace nanovllm::python {

std::vector<int> PyTokenizer::encode(nb::handle text, bool add_special_tokens) const {
  return tokenizer_.encode(to_string(text, "text"), add_special_tokens);
}

std::string PyTokenizer::decode(nb::handle ids, bool skip_special_tokens) const {
  return tokenizer_.decode(to_int_list(ids, "token_ids"), skip_special_tokens);
}

nb::object PyTokenizer::apply_chat_template(nb::handle conversation, bool tokenize,
                                            bool add_generation_prompt,
                                            const nb::kwargs& kwargs) const {
  const nlohmann::ordered_json messages = to_json(conversation, "conversation");
  const nlohmann::ordered_json variables = to_json(kwargs, "kwargs");
  std::string text;
  try {
    if (!chat_) chat_.emplace(tokenizer_);
    text = chat_->render(messages, add_generation_prompt, variables);
  } catch (const Error& error) {
    throw_value_error(fmt::format("apply_chat_template: {}", error.what()));
  }
  if (!tokenize) return nb::cast(text);
  return nb::cast(tokenizer_.encode(text));
}

namespace {

PyTokenizer load_tokenizer(nb::handle path) {
  const std::filesystem::path dir = to_path(path, "path");
  try {
    return PyTokenizer(Tokenizer::from_dir(dir));
  } catch (const Error& error) {
    throw_value_error(
        fmt::format("cannot load a tokenizer from '{}': {}", dir.string(), error.what()));
  }
}

}  // namespace

void bind_tokenizer(nb::module_& module) {
  nb::class_<PyTokenizer>(module, "Tokenizer",
                          "A Hugging Face byte-level BPE tokenizer (tokenizer.json) with its chat "
                          "template (tokenizer_config.json), run by the engine's own C++ code.")
      .def_static("from_pretrained", &load_tokenizer, nb::arg("path"),
                  nb::sig("def from_pretrained(path: str | os.PathLike[str]) -> Tokenizer"),
                  "Loads tokenizer.json (and tokenizer_config.json when present) from a model "
                  "directory. Raises ValueError with the reason when it cannot.")
      .def("encode", &PyTokenizer::encode, nb::arg("text"), nb::arg("add_special_tokens") = true,
           nb::sig("def encode(self, text: str, add_special_tokens: bool = True) -> list[int]"),
           "Token ids of `text`; special tokens written in it become their ids. "
           "add_special_tokens adds what the tokenizer's post-processor adds (nothing for Qwen3).")
      .def("decode", &PyTokenizer::decode, nb::arg("token_ids"),
           nb::arg("skip_special_tokens") = false,
           nb::sig("def decode(self, token_ids: collections.abc.Sequence[int], "
                   "skip_special_tokens: bool = False) "
                   "-> str"),
           "The text of `token_ids`. An id no token has (outside the vocabulary, or the padding "
           "past it) adds no text, as in Hugging Face's decode.")
      .def("apply_chat_template", &PyTokenizer::apply_chat_template, nb::arg("conversation"),
           nb::arg("tokenize") = true, nb::arg("add_generation_prompt") = false, nb::arg("kwargs"),
           nb::sig(
               "def apply_chat_template(self, conversation: "
               "collections.abc.Sequence[collections.abc.Mapping[str, typing.Any]], "
               "tokenize: bool = True, add_generation_prompt: bool = False, **kwargs: typing.Any) "
               "-> str | list[int]"),
           "Renders chat messages with the tokenizer's chat template, as transformers does: the "
           "text, or its token ids when `tokenize`. Extra keyword arguments are template "
           "variables (e.g. enable_thinking=False).")
      .def_prop_ro(
          "vocab_size", [](const PyTokenizer& self) { return self.tokenizer().vocab_size(); },
          "One past the largest token id.")
      .def_prop_ro(
          "eos_token_id", [](const PyTokenizer& self) { return self.tokenizer().eos_token_id(); },
          "The end-of-sequence token's id (tokenizer_config.json), or None.")
      .def_prop_ro(
          "eos_token", [](const PyTokenizer& self) { return self.tokenizer().eos_token(); },
          "The end-of-sequence token (tokenizer_config.json), or None.")
      .def_prop_ro(
          "bos_token_id", [](const PyTokenizer& self) { return self.tokenizer().bos_token_id(); },
          "The beginning-of-sequence token's id (tokenizer_config.json), or None.")
      .def_prop_ro(
          "pad_token_id", [](const PyTokenizer& self) { return self.tokenizer().pad_token_id(); },
          "The padding token's id (tokenizer_config.json), or None.");
}

}  // namespace nanovllm::python
