#include "jinja/string_ops.h"

#include <algorithm>

#include "jinja/error.h"
#include "jinja/unicode.h"

namespace nanovllm::jinja {

std::string py_strip(const std::string& s, const std::optional<std::string>& chars, bool left,
                     bool right) {
  std::u32string cps = utf8_decode(s);
  std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strip_char = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_py_space(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_char(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_char(cps[e - 1])) --e;
  }
  return utf8_encode(std::u32string_view(cps).substr(b, e - b));
}

namespace {

std::vector<std::string> split_whitespace(const std::u32string& s, int64_t maxsplit,
                                          bool from_right) {
  std::vector<std::string> out;
  if (!from_right) {
    size_t i = 0, n = s.size();
    while (true) {
      while (i < n && is_py_space(s[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(utf8_encode(std::u32string_view(s).substr(i)));  // keeps trailing spaces
        break;
      }
      size_t j = i;
      while (j < n && !is_py_space(s[j])) ++j;
      out.push_back(utf8_encode(std::u32string_view(s).substr(i, j - i)));
      i = j;
    }
    return out;
  }
  size_t e = s.size();
  while (true) {
    while (e > 0 && is_py_space(s[e - 1])) --e;
    if (e == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(utf8_encode(std::u32string_view(s).substr(0, e)));  // keeps leading spaces
      break;
    }
    size_t j = e;
    while (j > 0 && !is_py_space(s[j - 1])) --j;
    out.push_back(utf8_encode(std::u32string_view(s).substr(j, e - j)));
    e = j;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep,
                                  int64_t maxsplit, bool from_right) {
  if (!sep) return split_whitespace(utf8_decode(s), maxsplit, from_right);
  if (sep->empty()) runtime_fail("empty separator");
  std::vector<std::string> out;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t at = s.find(*sep, start);
      if (at == std::string::npos) break;
      out.push_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.push_back(s.substr(start));
    return out;
  }
  size_t end = s.size();
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    if (end < sep->size()) break;
    size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string::npos) break;
    out.push_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
    ++splits;
  }
  out.push_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_splitlines(const std::string& s, bool keepends) {
  std::u32string cps = utf8_decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!is_py_linebreak(cps[i])) continue;
    size_t eol = i + 1;
    if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') eol = i + 2;
    out.push_back(
        utf8_encode(std::u32string_view(cps).substr(start, (keepends ? eol : i) - start)));
    start = eol;
    i = eol - 1;
  }
  if (start < cps.size()) out.push_back(utf8_encode(std::u32string_view(cps).substr(start)));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& with,
                       int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    std::u32string cps = utf8_decode(s);
    int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      utf8_append(out, c);
      check_built_size(out.size());
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += with;
    check_built_size(out.size());
    start = at + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::string py_title(const std::string& s) {
  std::u32string cps = utf8_decode(s);
  std::u32string out;
  bool previous_cased = false;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (previous_cased) {
      append_lower_at(out, cps, i);
    } else {
      append_title(out, cps[i]);
    }
    previous_cased = is_cased(cps[i]);
  }
  return utf8_encode(out);
}

std::string py_capitalize(const std::string& s) {
  std::u32string cps = utf8_decode(s);
  std::u32string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (i == 0) {
      append_title(out, cps[i]);
    } else {
      append_lower_at(out, cps, i);
    }
  }
  return utf8_encode(out);
}

std::string jinja_title(const std::string& s) {
  // re.split(r"([-\s({\[<]+)") then item[0].upper() + item[1:].lower() for each piece.
  std::u32string cps = utf8_decode(s);
  auto is_delim = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_py_space(c);
  };
  std::u32string out;
  size_t i = 0;
  while (i < cps.size()) {
    size_t j = i;
    bool delim = is_delim(cps[i]);
    while (j < cps.size() && is_delim(cps[j]) == delim) ++j;
    // item[0].upper() + item[1:].lower(): the rest is lowered as a string of its own.
    append_upper(out, cps[i]);
    std::u32string_view rest = std::u32string_view(cps).substr(i + 1, j - i - 1);
    for (size_t k = 0; k < rest.size(); ++k) append_lower_at(out, rest, k);
    i = j;
  }
  return utf8_encode(out);
}

namespace {

// Python's clamping of start/end for find/count on a sequence of `length`.
std::pair<size_t, size_t> clamp_range(size_t length, std::optional<int64_t> start,
                                      std::optional<int64_t> end) {
  auto norm = [&](std::optional<int64_t> v, size_t fallback) -> size_t {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) x += static_cast<int64_t>(length);
    if (x < 0) x = 0;
    return std::min(static_cast<size_t>(x), length);
  };
  return {norm(start, 0), norm(end, length)};
}

}  // namespace

int64_t py_find(const std::string& s, const std::string& sub, std::optional<int64_t> start,
                std::optional<int64_t> end, bool from_right) {
  std::u32string hay = utf8_decode(s);
  std::u32string needle = utf8_decode(sub);
  auto [b, e] = clamp_range(hay.size(), start, end);
  if (b > e || e - b < needle.size()) return -1;
  std::u32string_view window = std::u32string_view(hay).substr(b, e - b);
  size_t at = from_right ? window.rfind(needle) : window.find(needle);
  return at == std::u32string_view::npos ? -1 : static_cast<int64_t>(b + at);
}

int64_t py_count(const std::string& s, const std::string& sub, std::optional<int64_t> start,
                 std::optional<int64_t> end) {
  std::u32string hay = utf8_decode(s);
  std::u32string needle = utf8_decode(sub);
  auto [b, e] = clamp_range(hay.size(), start, end);
  if (b > e) return 0;
  if (needle.empty()) return static_cast<int64_t>(e - b + 1);
  int64_t n = 0;
  std::u32string_view window = std::u32string_view(hay).substr(b, e - b);
  for (size_t at = window.find(needle); at != std::u32string_view::npos;
       at = window.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

SliceBounds normalize_slice(size_t length, std::optional<int64_t> start,
                            std::optional<int64_t> stop, std::optional<int64_t> step) {
  int64_t st = step.value_or(1);
  if (st == 0) runtime_fail("slice step cannot be zero");
  int64_t len = static_cast<int64_t>(length);
  auto adjust = [&](std::optional<int64_t> v, int64_t lower, int64_t upper, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  if (st > 0) return {adjust(start, 0, len, 0), adjust(stop, 0, len, len), st};
  return {adjust(start, -1, len - 1, len - 1), adjust(stop, -1, len - 1, -1), st};
}

std::vector<size_t> slice_indices(size_t length, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, std::optional<int64_t> step) {
  SliceBounds b = normalize_slice(length, start, stop, step);
  std::vector<size_t> out;
  for (int64_t i = b.start; b.step > 0 ? i < b.stop : i > b.stop; i += b.step) {
    out.push_back(static_cast<size_t>(i));
  }
  return out;
}

}  // namespace nanovllm::jinja
