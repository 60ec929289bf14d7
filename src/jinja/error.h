// Errors of the template engine: syntax errors at parse time and runtime errors while rendering,
// both carrying the template position they come from.
#pragma once

#include <cstdint>
#include <string>

#include "core/check.h"

namespace nanovllm::jinja {

class TemplateError : public Error {
 public:
  // `raised_by_template` marks raise_exception(msg): what() is then the template's message as is.
  TemplateError(const std::string& message, int line, int column, bool raised_by_template = false);

  const std::string& message() const { return message_; }
  int line() const { return line_; }
  int column() const { return column_; }
  bool raised_by_template() const { return raised_by_template_; }

 private:
  std::string message_;
  int line_;
  int column_;
  bool raised_by_template_;
};

// Thrown by value operations that know no position; the evaluator turns it into a TemplateError
// at the innermost expression that failed.
class RuntimeFailure : public Error {
 public:
  explicit RuntimeFailure(const std::string& message, bool raised_by_template = false)
      : Error(message), raised_by_template_(raised_by_template) {}
  bool raised_by_template() const { return raised_by_template_; }

 private:
  bool raised_by_template_;
};

// Throws RuntimeFailure with a formatted message.
[[noreturn]] void runtime_fail(const std::string& message);

// The largest string (bytes) or list (items) one operation may build: far beyond any prompt, so
// that `'x' * 10**12` or `center(10**12)` fails cleanly instead of exhausting memory.
inline constexpr uint64_t kMaxBuiltSize = uint64_t{1} << 26;
// Throws RuntimeFailure when `count` pieces of `size` each would exceed kMaxBuiltSize.
void check_built_size(uint64_t size, uint64_t count = 1);

}  // namespace nanovllm::jinja
