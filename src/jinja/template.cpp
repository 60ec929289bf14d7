#include "jinja/template.h"

#include "jinja/evaluator.h"
#include "jinja/json_value.h"
#include "jinja/parser.h"

namespace nanovllm::jinja {

Template::Template(std::string_view source)
    : parsed_(std::make_shared<const ParsedTemplate>(parse_template(source))) {}

std::string Template::render(const Value& context) const {
  Evaluator evaluator(context);
  return evaluator.render(*parsed_);
}

std::string Template::render(const nlohmann::ordered_json& context) const {
  return render(value_from_json(context));
}

}  // namespace nanovllm::jinja
