// Filters on strings and numbers, and transformers' tojson.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja/args.h"
#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/format.h"
#include "jinja/json_dump.h"
#include "jinja/operators.h"
#include "jinja/string_ops.h"
#include "jinja/unicode.h"
#include "jinja/value_format.h"

namespace nanovllm::jinja {

namespace {

// jinja2's soft_str: Markup stays Markup, anything else becomes str.
Value as_text(const Value& v) {
  return v.is_string() ? v : Value(python_str(v));
}

// Markup in, Markup out, as for the str methods markupsafe wraps.
Value like(const Value& input, std::string s) {
  return input.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
}

Value f_trim(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("trim", args, {"chars"});
  return like(v, py_strip(python_str(v), a.get_string(0), true, true));
}

Value f_lower(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("lower", args, {});
  return like(v, py_lower(python_str(v)));
}

Value f_upper(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("upper", args, {});
  return like(v, py_upper(python_str(v)));
}

Value f_title(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("title", args, {});
  return Value(jinja_title(python_str(v)));
}

Value f_capitalize(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("capitalize", args, {});
  return like(v, py_capitalize(python_str(v)));
}

Value f_replace(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("replace", args, {"old", "new", "count"}, 2);
  return Value(py_replace(python_str(v), python_str(a.get(0)), python_str(a.get(1)),
                          a.get_int(2).value_or(-1)));
}

Value f_string(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("string", args, {});
  if (v.is_string()) return v;
  return Value(python_str(v));
}

Value f_safe(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("safe", args, {});
  return Value::markup(python_str(v));
}

Value f_escape(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("escape", args, {});
  if (v.is_markup()) return v;
  return Value::markup(html_escape(python_str(v)));
}

Value f_forceescape(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("forceescape", args, {});
  return Value::markup(html_escape(python_str(v)));
}

Value f_indent(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("indent", args, {"width", "first", "blank"});
  Value width = a.get_or(0, Value(4));
  std::string indention;
  if (width.is_string()) {
    indention = width.str();
  } else if (width.is_int() || width.is_bool()) {
    const int64_t spaces = std::max<int64_t>(0, width.as_int());
    check_built_size(static_cast<uint64_t>(spaces));
    indention = std::string(static_cast<size_t>(spaces), ' ');
  } else {
    runtime_fail("indent(): width must be an integer or a string");
  }
  bool first = a.get_bool(1, false);
  bool blank = a.get_bool(2, false);
  if (v.is_undefined()) fail_undefined(v);  // jinja2 appends "\n" to the value itself
  if (!v.is_string()) {
    runtime_fail("unsupported operand type(s) for +=: '" + v.type_name() + "' and 'str'");
  }
  std::string s = python_str(v) + "\n";  // jinja2 appends a newline before splitting
  std::vector<std::string> lines = py_splitlines(s, false);
  check_built_size(s.size() + indention.size() * lines.size());
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i];
    }
  } else if (!lines.empty()) {
    rv = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
    }
  }
  if (first) rv = indention + rv;
  return like(v, std::move(rv));
}

Value f_center(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("center", args, {"width"});
  int64_t width = a.get_int(0).value_or(80);
  std::string s = python_str(v);
  int64_t len = static_cast<int64_t>(codepoint_count(s));
  if (width <= len) return like(v, s);
  check_built_size(static_cast<uint64_t>(width));
  int64_t total = width - len;
  int64_t left = total / 2 + (total & width & 1);
  return like(v, std::string(static_cast<size_t>(left), ' ') + s +
                     std::string(static_cast<size_t>(total - left), ' '));
}

Value f_wordcount(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("wordcount", args, {});
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(python_str(v))) {
    bool word_char = c == '_' || is_alpha(c) || is_decimal_digit(c);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value(words);
}

Value f_format(Evaluator&, const Value& v, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    runtime_fail("format(): can't handle positional and keyword arguments at the same time");
  }
  if (!args.keyword.empty()) {
    DictData d;
    for (const auto& [k, val] : args.keyword) d.set(Value(k), val);
    return percent_format_value(as_text(v), Value::dict(std::move(d)));
  }
  return percent_format_value(as_text(v), Value::tuple(args.positional));
}

// Python's int(str, base): optional sign, underscores between digits, surrounding whitespace.
std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string s = py_strip(text, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  std::string digits;
  size_t i = 0;
  if (s[0] == '+' || s[0] == '-') digits += s[i++];
  if (base == 16 || base == 8 || base == 2) {
    if (s.size() > i + 1 && s[i] == '0') {
      char p = static_cast<char>(s[i + 1] | 0x20);
      if ((base == 16 && p == 'x') || (base == 8 && p == 'o') || (base == 2 && p == 'b')) i += 2;
    }
  }
  bool last_digit = false;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && last_digit && i + 1 < s.size() && s[i + 1] != '_') {
      last_digit = false;
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(s[i]))) return std::nullopt;
    digits += s[i];
    last_digit = true;
  }
  if (!last_digit) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0' || errno == ERANGE) return std::nullopt;
  return v;
}

// Python's float(str): decimal or exponent notation, inf, nan, underscores between digits.
std::optional<double> parse_float(const std::string& text) {
  std::string s = py_strip(text, std::nullopt, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(s[i + 1])))
        return std::nullopt;
      continue;
    }
    clean += s[i];
  }
  if (clean.empty()) return std::nullopt;
  std::string lower = py_lower(clean);
  std::string body = lower[0] == '+' || lower[0] == '-' ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    double d = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -d : d;
  }
  if (body.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return d;
}

Value f_int(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("int", args, {"default", "base"});
  Value fallback = a.get_or(0, Value(0));
  int base = static_cast<int>(a.get_int(1).value_or(10));
  if (v.is_undefined()) fail_undefined(v);  // Undefined.__int__ raises in jinja2
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value(static_cast<int64_t>(std::trunc(d)));
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), base)) return Value(*i);
    if (auto d = parse_float(v.str()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18) {
      return Value(static_cast<int64_t>(std::trunc(*d)));
    }
  }
  return fallback;
}

Value f_float(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("float", args, {"default"});
  Value fallback = a.get_or(0, Value(0.0));
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    if (auto d = parse_float(v.str())) return Value(*d);
  }
  return fallback;
}

Value f_abs(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("abs", args, {});
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) runtime_fail("integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  runtime_fail("bad operand type for abs(): '" + v.type_name() + "'");
}

// Python's round(x, ndigits): correctly rounded, ties to even.
double py_round(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits >= 0) {
    if (ndigits > 300) return x;
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-ndigits));
  double y = x / scale;
  double r = std::nearbyint(y);  // the default rounding mode rounds ties to even
  return r * scale;
}

Value f_round(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("round", args, {"precision", "method"});
  int64_t precision = a.get_int(0).value_or(0);
  std::string method = a.get_string(1).value_or("common");
  if (method != "common" && method != "ceil" && method != "floor") {
    runtime_fail("method must be common, ceil or floor");
  }
  if (!v.is_number()) runtime_fail("type " + v.type_name() + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_float()) return Value(py_round(v.as_double(), precision));
    if (precision >= 0) return Value(v.as_int());
    return Value(static_cast<int64_t>(py_round(static_cast<double>(v.as_int()), precision)));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double scaled = v.as_double() * scale;
  double r = method == "ceil" ? std::ceil(scaled) : std::floor(scaled);
  return Value(r / scale);
}

Value f_default(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("default", args, {"default_value", "boolean"});
  bool boolean = a.get_bool(1, false);
  if (v.is_undefined() || (boolean && !v.truthy())) return a.get_or(0, Value(""));
  return v;
}

Value f_tojson(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions opt;
  opt.ensure_ascii = a.get_bool(0, false);
  const Value& indent = a.get(1);
  if (indent.is_string()) {
    opt.indent = indent.str();
  } else if (indent.is_int() || indent.is_bool()) {
    const int64_t spaces = std::max<int64_t>(0, indent.as_int());
    check_built_size(static_cast<uint64_t>(spaces));
    opt.indent = std::string(static_cast<size_t>(spaces), ' ');
  } else if (!indent.is_undefined() && !indent.is_none()) {
    runtime_fail("tojson(): indent must be an integer or a string");
  }
  const Value& separators = a.get(2);
  if (!separators.is_undefined() && !separators.is_none()) {
    ValueList parts = iterate(separators);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) {
      runtime_fail("tojson(): separators must be a pair of strings");
    }
    opt.item_separator = parts[0].str();
    opt.key_separator = parts[1].str();
  } else if (opt.indent) {
    opt.item_separator.assign(1, ',');  // json.dumps drops the space after commas with an indent
  }
  opt.sort_keys = a.get_bool(3, false);
  return Value(json_dumps(v, opt));
}

}  // namespace

const FilterTable& string_filters() {
  static const FilterTable table = {
      {"trim", f_trim},
      {"lower", f_lower},
      {"upper", f_upper},
      {"title", f_title},
      {"capitalize", f_capitalize},
      {"replace", f_replace},
      {"string", f_string},
      {"safe", f_safe},
      {"escape", f_escape},
      {"e", f_escape},
      {"forceescape", f_forceescape},
      {"indent", f_indent},
      {"center", f_center},
      {"wordcount", f_wordcount},
      {"format", f_format},
      {"int", f_int},
      {"float", f_float},
      {"abs", f_abs},
      {"round", f_round},
      {"default", f_default},
      {"d", f_default},
      {"tojson", f_tojson},
  };
  return table;
}

}  // namespace nanovllm::jinja
