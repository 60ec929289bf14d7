// Python semantics of the expression operators: arithmetic, comparison, membership, `~`.
#pragma once

#include <string>

#include "jinja/value.h"

namespace nanovllm::jinja {

// Raises jinja2's UndefinedError for an Undefined operand (its hint names what was missing).
[[noreturn]] void fail_undefined(const Value& undefined);

// op: + - * / // % **. Throws RuntimeFailure where Python raises (types, zero division,
// 64-bit overflow).
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v);
Value unary_plus(const Value& v);
// op: == != < <= > >= in notin
bool compare_op(const std::string& op, const Value& a, const Value& b);
// Python `a < b` for the orderable types (numbers, strings, lists, tuples).
bool less_than(const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);

// Python's int and float division/modulo rules.
int64_t floor_div(int64_t a, int64_t b);
int64_t floor_mod(int64_t a, int64_t b);

}  // namespace nanovllm::jinja
