// Shared helpers for the template engine's unit tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "jinja/error.h"
#include "jinja/template.h"

namespace nanovllm::jinja::testing {

inline std::string render(const std::string& source, const nlohmann::ordered_json& context =
                                                         nlohmann::ordered_json::object()) {
  return Template(source).render(context);
}

// Renders and returns the error; fails the test if rendering succeeds.
inline TemplateError render_error(const std::string& source, const nlohmann::ordered_json& context =
                                                                 nlohmann::ordered_json::object()) {
  try {
    std::string out = Template(source).render(context);
    ADD_FAILURE() << "expected an error, rendered: " << out;
  } catch (const TemplateError& e) {
    return e;
  }
  return TemplateError("no error", 0, 0);
}

struct Case {
  const char* source;
  const char* expected;
};

inline void expect_renders(
    const Case& c, const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  try {
    EXPECT_EQ(render(c.source, context), c.expected) << "template: " << c.source;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "template: " << c.source << " threw: " << e.what();
  }
}

}  // namespace nanovllm::jinja::testing
