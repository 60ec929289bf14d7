// Python string formatting used by templates: `%` (and the `format` filter), str.format(),
// and markupsafe's HTML escaping.
#pragma once

#include <string>

#include "jinja/value.h"

namespace nanovllm::jinja {

// `fmt % args` with printf-style conversions (s r d i x X o e E f F g G c %) and %(name)s keys.
std::string percent_format(const std::string& fmt, const Value& args);
// str.format with {} / {0} / {name} fields and !s / !r conversions; format specs are rejected.
std::string brace_format(const std::string& fmt, const CallArgs& args);
// markupsafe.escape: & < > " '
std::string html_escape(const std::string& s);

}  // namespace nanovllm::jinja
