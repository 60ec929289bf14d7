#include "jinja/unicode.h"

#include <utf8proc.h>

#include <algorithm>

#include "jinja/error.h"
#include "jinja/unicode_tables.h"

namespace nanovllm::jinja {

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    if (*p < 0x80) {
      out.push_back(*p++);
      --left;
      continue;
    }
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) runtime_fail("string is not valid UTF-8");
    out.push_back(static_cast<char32_t>(cp));
    p += n;
    left -= n;
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return false;
  }
  return true;
}

size_t codepoint_count(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_py_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_py_linebreak(char32_t c) {
  return (c >= 0x0A && c <= 0x0D) || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
         c == 0x2029;
}

namespace {

utf8proc_category_t category(char32_t c) {
  return static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
}

}  // namespace

bool is_py_printable(char32_t c) {
  if (c == ' ') return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool is_upper(char32_t c) {
  return category(c) == UTF8PROC_CATEGORY_LU;
}
bool is_lower(char32_t c) {
  return category(c) == UTF8PROC_CATEGORY_LL;
}

namespace {

bool in_ranges(char32_t c, const CodepointRange* ranges, size_t n) {
  const CodepointRange* end = ranges + n;
  const CodepointRange* it = std::upper_bound(
      ranges, end, c, [](char32_t v, const CodepointRange& r) { return v < r.first; });
  return it != ranges && c <= (it - 1)->last;
}

const SpecialCasing* special_casing(char32_t c) {
  const SpecialCasing* end = kSpecialCasing + kSpecialCasingSize;
  const SpecialCasing* it = std::lower_bound(
      kSpecialCasing, end, c, [](const SpecialCasing& s, char32_t v) { return s.codepoint < v; });
  return it != end && it->codepoint == c ? it : nullptr;
}

// Capital sigma lowers to final sigma after a cased letter and not before one, skipping
// case-ignorable characters (CPython's handle_capital_sigma).
bool is_final_sigma(std::u32string_view s, size_t i) {
  size_t j = i;
  while (j > 0 && is_case_ignorable(s[j - 1])) --j;
  if (j == 0 || !is_cased(s[j - 1])) return false;
  size_t k = i + 1;
  while (k < s.size() && is_case_ignorable(s[k])) ++k;
  return k == s.size() || !is_cased(s[k]);
}

}  // namespace

bool is_cased(char32_t c) {
  return in_ranges(c, kCasedRanges, kCasedRangesSize);
}

bool is_case_ignorable(char32_t c) {
  return in_ranges(c, kCaseIgnorableRanges, kCaseIgnorableRangesSize);
}

bool is_alpha(char32_t c) {
  auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
         cat == UTF8PROC_CATEGORY_LT || cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_LO;
}

bool is_decimal_digit(char32_t c) {
  return category(c) == UTF8PROC_CATEGORY_ND;
}

void append_lower_at(std::u32string& out, std::u32string_view s, size_t i) {
  char32_t c = s[i];
  if (c < 0x80) {
    out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
  } else if (c == 0x3A3) {
    out.push_back(is_final_sigma(s, i) ? 0x3C2 : 0x3C3);
  } else if (const SpecialCasing* sc = special_casing(c)) {
    out += sc->lower;
  } else {
    out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
}

void append_upper(std::u32string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(c >= 'a' && c <= 'z' ? c - 32 : c);
  } else if (const SpecialCasing* sc = special_casing(c)) {
    out += sc->upper;
  } else {
    out.push_back(static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
  }
}

void append_title(std::u32string& out, char32_t c) {
  if (c < 0x80) {
    append_upper(out, c);
  } else if (const SpecialCasing* sc = special_casing(c)) {
    out += sc->title;
  } else {
    out.push_back(static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))));
  }
}

std::string py_lower(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return out;
  }
  std::u32string cps = utf8_decode(s);
  std::u32string out;
  for (size_t i = 0; i < cps.size(); ++i) append_lower_at(out, cps, i);
  return utf8_encode(out);
}

std::string py_upper(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    }
    return out;
  }
  std::u32string out;
  for (char32_t c : utf8_decode(s)) append_upper(out, c);
  return utf8_encode(out);
}

}  // namespace nanovllm::jinja
