#include "jinja/chat_template.h"

#include "core/check.h"
#include "jinja/json_value.h"

namespace nanovllm {

namespace {

using jinja::DictData;
using jinja::Value;
using jinja::ValueList;

// transformers' _alias_reasoning_fields: {"thinking": r, **message, "reasoning_content": r}.
Value alias_reasoning(const Value& message) {
  const DictData& d = message.dict_data();
  const Value* reasoning = nullptr;
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    const Value* v = d.find(std::string_view(key));
    if (v && !v->is_none()) {
      reasoning = v;
      break;
    }
  }
  if (!reasoning) return message;
  DictData out;
  out.set(Value("thinking"), *reasoning);
  for (const auto& [k, v] : d.entries) out.set(k, v);
  out.set(Value("reasoning_content"), *reasoning);
  return Value::dict(std::move(out));
}

Value build_context(const Value& messages, bool add_generation_prompt, const Value& extra) {
  if (!messages.is_list()) throw Error("chat template: messages must be a JSON array");
  ValueList chat;
  for (const Value& m : messages.items()) {
    if (!m.is_dict()) throw Error("chat template: every message must be a JSON object");
    chat.push_back(alias_reasoning(m));
  }
  if (!extra.is_dict()) throw Error("chat template: extra kwargs must be a JSON object");
  DictData context;
  context.set(Value("messages"), Value::list(std::move(chat)));
  context.set(Value("tools"), Value::none());
  context.set(Value("documents"), Value::none());
  context.set(Value("add_generation_prompt"), Value(add_generation_prompt));
  for (const auto& [k, v] : extra.dict_data().entries) {
    if (k.str() == "messages" || k.str() == "add_generation_prompt") {
      throw Error("chat template: '" + k.str() + "' cannot be passed as an extra kwarg");
    }
    context.set(k, v);
  }
  return Value::dict(std::move(context));
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source) : template_(source) {}

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra_kwargs) const {
  return template_.render(build_context(jinja::value_from_json(messages), add_generation_prompt,
                                        jinja::value_from_json(extra_kwargs)));
}

std::string ChatTemplate::render_ordered(const nlohmann::ordered_json& messages,
                                         bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra_kwargs) const {
  return template_.render(build_context(jinja::value_from_json(messages), add_generation_prompt,
                                        jinja::value_from_json(extra_kwargs)));
}

}  // namespace nanovllm
