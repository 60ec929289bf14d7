#include "jinja/template.h"

#include "jinja/evaluator.h"
#include "jinja/json_value.h"
#include "jinja/parser.h"

namespace nanovllm::jinja {

Template::Template(std::string_view source)
    : body_(std::make_shared<const Body>(parse_template(source))) {}

std::string Template::render(const Value& context) const {
  Evaluator evaluator(context);
  return evaluator.render(*body_);
}

std::string Template::render(const nlohmann::ordered_json& context) const {
  return render(value_from_json(context));
}

}  // namespace nanovllm::jinja
