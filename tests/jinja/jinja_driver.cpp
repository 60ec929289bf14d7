// Renders templates read as JSON lines on stdin, one JSON line of output each, for the
// differential tests against jinja2 and transformers:
//   {"template": "...", "context": {...}}                      -> {"output": "..."} | {"error":
//   "..."}
//   {"chat_template": "...", "messages": [...], "add_generation_prompt": b, "kwargs": {...}}
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "jinja/chat_template.h"
#include "jinja/template.h"

using nlohmann::ordered_json;

namespace {

ordered_json handle(const ordered_json& request) {
  ordered_json reply;
  try {
    if (request.contains("chat_template")) {
      nanovllm::ChatTemplate chat(request.at("chat_template").get<std::string>());
      reply["output"] =
          chat.render_ordered(request.at("messages"), request.value("add_generation_prompt", false),
                              request.value("kwargs", ordered_json::object()));
    } else {
      nanovllm::jinja::Template tmpl(request.at("template").get<std::string>());
      reply["output"] = tmpl.render(request.value("context", ordered_json::object()));
    }
  } catch (const std::exception& e) {
    reply["error"] = e.what();
  }
  return reply;
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    ordered_json reply;
    try {
      reply = handle(ordered_json::parse(line));
    } catch (const std::exception& e) {
      reply["error"] = std::string("bad request: ") + e.what();
    }
    std::cout << reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n"
              << std::flush;
  }
  return 0;
}
