// Python's str() and repr() of values: what `{{ x }}` prints and how containers show their items.
#pragma once

#include <string>

#include "jinja/value.h"

namespace nanovllm::jinja {

// float.__repr__: shortest round-trip digits, exponent form outside [1e-4, 1e16), "inf", "nan".
std::string format_float_repr(double d);
// str.__repr__ with Python's choice of quotes and escapes.
std::string string_repr(const std::string& s);
// str(value); an Undefined prints as "". Throws for values jinja2 would print as an object address.
std::string python_str(const Value& v);
std::string python_repr(const Value& v);

}  // namespace nanovllm::jinja
