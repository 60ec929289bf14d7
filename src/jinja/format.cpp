#include "jinja/format.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "jinja/error.h"
#include "jinja/unicode.h"
#include "jinja/value_format.h"

namespace nanovllm::jinja {

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

struct Spec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char conversion = 0;
};

std::string pad(std::string s, const Spec& spec) {
  size_t len = codepoint_count(s);
  if (spec.width < 0 || len >= static_cast<size_t>(spec.width)) return s;
  check_built_size(s.size() + static_cast<size_t>(spec.width));
  std::string fill(static_cast<size_t>(spec.width) - len, ' ');
  return spec.flags.find('-') != std::string::npos ? s + fill : fill + s;
}

// printf of one value, however long the result (widths and precisions are bounded by
// check_built_size when they are read).
template <typename T>
std::string c_format(const std::string& cfmt, T value) {
  const int size = std::snprintf(nullptr, 0, cfmt.c_str(), value);
  if (size < 0) runtime_fail("cannot format " + cfmt);
  std::string out(static_cast<size_t>(size), '\0');
  std::snprintf(out.data(), out.size() + 1, cfmt.c_str(), value);
  return out;
}

std::string format_number(const Value& v, const Spec& spec) {
  std::string cfmt = "%" + spec.flags;
  if (spec.width >= 0) cfmt += std::to_string(spec.width);
  char conv = spec.conversion;
  bool integer_conv =
      conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o';
  if (!v.is_number()) {
    runtime_fail(fmt::format(
        "%{} format: a {} is required, not {}", conv,
        integer_conv && conv != 'd' && conv != 'i' && conv != 'u' ? "integer" : "real number",
        v.type_name()));
  }
  if (integer_conv) {
    if (v.is_float() && conv != 'd' && conv != 'i' && conv != 'u') {
      runtime_fail(fmt::format("%{} format: an integer is required, not float", conv));
    }
    if (v.is_float() && !std::isfinite(v.as_double()))
      runtime_fail("cannot convert float infinity or NaN to integer");
    // Integers here are 64-bit (as everywhere in this engine); larger floats do not convert.
    if (v.is_float() && std::fabs(std::trunc(v.as_double())) >= 0x1p63) {
      runtime_fail("integers beyond 64 bits are not supported");
    }
    long long n = v.is_float() ? static_cast<long long>(std::trunc(v.as_double())) : v.as_int();
    if (spec.precision >= 0) cfmt += fmt::format(".{}", spec.precision);
    cfmt += conv == 'i' || conv == 'u' ? std::string("lld") : std::string("ll") + conv;
    return c_format(cfmt, n);
  }
  cfmt += fmt::format(".{}", spec.precision >= 0 ? spec.precision : 6);
  cfmt += conv;
  return c_format(cfmt, v.as_double());
}

std::string convert(const Value& v, const Spec& spec, bool escape_args) {
  switch (spec.conversion) {
    case 's':
    case 'r':
    case 'a': {
      std::string s = spec.conversion == 's' ? python_str(v) : python_repr(v);
      if (escape_args && !(spec.conversion == 's' && v.is_markup())) s = html_escape(s);
      if (spec.precision >= 0) {
        std::u32string cps = utf8_decode(s);
        if (cps.size() > static_cast<size_t>(spec.precision)) {
          s = utf8_encode(std::u32string_view(cps).substr(0, static_cast<size_t>(spec.precision)));
        }
      }
      return pad(s, spec);
    }
    case 'c': {
      std::string s;
      if (v.is_string() && codepoint_count(v.str()) == 1) {
        s = v.str();
      } else if (v.is_int()) {
        utf8_append(s, static_cast<char32_t>(v.as_int()));
      } else {
        runtime_fail("%c requires an int or a single character");
      }
      return pad(s, spec);
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o':
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      return format_number(v, spec);
    default:
      runtime_fail(fmt::format("unsupported format character '{}'", spec.conversion));
  }
}

}  // namespace

Value percent_format_value(const Value& fmt, const Value& args) {
  if (fmt.is_markup()) return Value::markup(percent_format(fmt.str(), args, true));
  return Value(percent_format(fmt.str(), args));
}

std::string percent_format(const std::string& fmt_str, const Value& args, bool escape_args) {
  ValueList positional;
  if (args.is_tuple()) {
    positional = args.items();
  } else {
    positional.push_back(args);
  }
  size_t next_arg = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < fmt_str.size(); ++i) {
    if (fmt_str[i] != '%') {
      out += fmt_str[i];
      continue;
    }
    if (++i >= fmt_str.size()) runtime_fail("incomplete format");
    Spec spec;
    const Value* mapped = nullptr;
    if (fmt_str[i] == '(') {
      size_t close = fmt_str.find(')', i);
      if (close == std::string::npos) runtime_fail("incomplete format key");
      if (!args.is_dict()) runtime_fail("format requires a mapping");
      mapped = args.dict_data().find(std::string_view(fmt_str).substr(i + 1, close - i - 1));
      if (!mapped) runtime_fail("KeyError: '" + fmt_str.substr(i + 1, close - i - 1) + "'");
      used_mapping = true;
      i = close + 1;
    }
    while (i < fmt_str.size() &&
           std::string_view("#0- +").find(fmt_str[i]) != std::string_view::npos) {
      spec.flags += fmt_str[i++];
    }
    auto read_number = [&](int* target) {
      if (i < fmt_str.size() && fmt_str[i] == '*')
        runtime_fail("'*' widths in % formatting are not supported");
      if (i < fmt_str.size() && std::isdigit(static_cast<unsigned char>(fmt_str[i]))) {
        *target = 0;
        while (i < fmt_str.size() && std::isdigit(static_cast<unsigned char>(fmt_str[i]))) {
          *target = *target * 10 + (fmt_str[i++] - '0');
          check_built_size(static_cast<uint64_t>(*target));  // also keeps it within int
        }
      }
    };
    read_number(&spec.width);
    if (i < fmt_str.size() && fmt_str[i] == '.') {
      ++i;
      spec.precision = 0;
      read_number(&spec.precision);
    }
    while (i < fmt_str.size() && (fmt_str[i] == 'h' || fmt_str[i] == 'l' || fmt_str[i] == 'L')) ++i;
    if (i >= fmt_str.size()) runtime_fail("incomplete format");
    spec.conversion = fmt_str[i];
    if (spec.conversion == '%') {
      out += '%';
      continue;
    }
    if (mapped) {
      out += convert(*mapped, spec, escape_args);
      continue;
    }
    if (next_arg >= positional.size()) runtime_fail("not enough arguments for format string");
    out += convert(positional[next_arg++], spec, escape_args);
  }
  // Python tolerates an unused argument that supports indexing (it may be meant as a mapping).
  bool mapping_like =
      args.is_dict() || args.is_undefined() || (args.is_indexable_sequence() && !args.is_tuple());
  if (!used_mapping && next_arg < positional.size() && !(mapping_like && next_arg == 0)) {
    runtime_fail("not all arguments converted during string formatting");
  }
  return out;
}

std::string brace_format(const std::string& f, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      runtime_fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = f.find('}', i);
    if (close == std::string::npos) runtime_fail("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 's';
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size()) runtime_fail("unsupported conversion in format string");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos) {
      runtime_fail("format specs in str.format() are not supported");
    }
    if (field.find_first_of(".[") != std::string::npos) {
      runtime_fail("attribute and index lookups in str.format() are not supported");
    }
    const Value* v = nullptr;
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t index = field.empty() ? auto_index++ : std::stoul(field);
      if (index >= args.positional.size()) {
        runtime_fail(
            fmt::format("Replacement index {} out of range for positional args tuple", index));
      }
      v = &args.positional[index];
    } else {
      for (const auto& [k, val] : args.keyword) {
        if (k == field) v = &val;
      }
      if (!v) runtime_fail("KeyError: '" + field + "'");
    }
    if (conversion == 's') {
      out += python_str(*v);
    } else if (conversion == 'r' || conversion == 'a') {
      out += python_repr(*v);
    } else {
      runtime_fail(fmt::format("Unknown conversion specifier {}", conversion));
    }
  }
  return out;
}

}  // namespace nanovllm::jinja
