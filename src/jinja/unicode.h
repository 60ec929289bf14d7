// UTF-8 <-> code points and the Python character classes the engine needs (Python strings index,
// slice, strip and change case by code point).
#pragma once

#include <string>
#include <string_view>

namespace nanovllm::jinja {

// Throws RuntimeFailure on malformed UTF-8.
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);

bool is_ascii(std::string_view s);
// Python len(str).
size_t codepoint_count(std::string_view s);

// str.isspace() / the `\s` of Python's re.
bool is_py_space(char32_t c);
// The line boundaries of str.splitlines().
bool is_py_linebreak(char32_t c);
// str.isprintable() for one character (decides repr escapes).
bool is_py_printable(char32_t c);
bool is_cased(char32_t c);
bool is_alpha(char32_t c);
bool is_decimal_digit(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);

bool is_case_ignorable(char32_t c);

// Python's full case mappings ('ß'.upper() == "SS", 'ﬁ'.title() == "Fi"). Lowering looks at the
// whole string `s` for the final-sigma rule ('ΟΔΟΣ'.lower() == "οδος").
void append_lower_at(std::u32string& out, std::u32string_view s, size_t i);
void append_upper(std::u32string& out, char32_t c);
void append_title(std::u32string& out, char32_t c);

std::string py_lower(std::string_view s);
std::string py_upper(std::string_view s);

}  // namespace nanovllm::jinja
