#include "jinja/error.h"

#include <fmt/format.h>

namespace nanovllm::jinja {

namespace {

std::string describe(const std::string& message, int line, int column, bool raised) {
  if (raised) return message;
  return fmt::format("jinja template error at line {}, column {}: {}", line, column, message);
}

}  // namespace

TemplateError::TemplateError(const std::string& message, int line, int column,
                             bool raised_by_template)
    : Error(describe(message, line, column, raised_by_template)),
      message_(message),
      line_(line),
      column_(column),
      raised_by_template_(raised_by_template) {}

void runtime_fail(const std::string& message) {
  throw RuntimeFailure(message);
}

void check_built_size(uint64_t size, uint64_t count) {
  uint64_t total = 0;
  if (__builtin_mul_overflow(size, count, &total) || total > kMaxBuiltSize) {
    runtime_fail(
        fmt::format("the result would hold {} x {} bytes or items, more than the {} a "
                    "template may build",
                    count, size, kMaxBuiltSize));
  }
}

}  // namespace nanovllm::jinja
