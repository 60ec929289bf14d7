// A parsed Jinja template that renders many times, with the environment transformers uses for
// chat templates: trim_blocks, lstrip_blocks, loop controls, {% generation %}, tojson with
// ensure_ascii=False, raise_exception and strftime_now.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace nanovllm::jinja {

// Immutable once built: one Template may render from several threads at once.
class Template {
 public:
  // Throws TemplateError with line and column on syntax errors and unsupported constructs.
  explicit Template(std::string_view source);

  // `context`: a dict of variables. Throws TemplateError on runtime errors (including
  // raise_exception, whose what() is the template's own message).
  std::string render(const Value& context) const;
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  std::shared_ptr<const ParsedTemplate> parsed_;
};

}  // namespace nanovllm::jinja
