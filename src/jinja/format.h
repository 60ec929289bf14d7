// Python string formatting used by templates: `%` (and the `format` filter), str.format(),
// and markupsafe's HTML escaping.
#pragma once

#include <string>

#include "jinja/value.h"

namespace nanovllm::jinja {

// `fmt % args` with printf-style conversions (s r d i x X o e E f F g G c %) and %(name)s keys.
// `escape_args`: the format string is Markup, so markupsafe HTML-escapes %s / %r arguments.
std::string percent_format(const std::string& fmt, const Value& args, bool escape_args = false);
// The result of `fmt % args` as a value: Markup when the format string is.
Value percent_format_value(const Value& fmt, const Value& args);
// str.format with {} / {0} / {name} fields and !s / !r conversions; format specs are rejected.
std::string brace_format(const std::string& fmt, const CallArgs& args);
// markupsafe.escape: & < > " '
std::string html_escape(const std::string& s);

}  // namespace nanovllm::jinja
