// JSON from outside the process (request bodies, input lines, checkpoint files): parsed with a
// nesting limit enforced while parsing, so that nothing later recurses over an unbounded depth,
// and quoted in error messages only as a short, flat excerpt.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace nanovllm {

// Deep enough for any chat request or checkpoint file; shallow enough that every recursive walk
// over a parsed value (copies, dumps, the chat template's conversion) stays a few KB of stack.
constexpr int kMaxJsonDepth = 128;

// Parses `text`; throws Error ("invalid JSON: ...", "a number in the JSON is out of range: ...",
// "the JSON nests deeper than 128 levels, the limit") on anything else. Error messages are ASCII:
// the parser's quote of the input has its other bytes replaced by '?'.
template <typename Json>
Json parse_json(std::string_view text, int max_depth = kMaxJsonDepth);

// `value` in at most about 80 characters, for error messages: scalars as JSON (long strings cut
// with "..."), containers by their first items, with nested containers shown as [...] or {...}.
// Walks one level only, whatever the depth of `value`.
template <typename Json>
std::string json_excerpt(const Json& value);

}  // namespace nanovllm
