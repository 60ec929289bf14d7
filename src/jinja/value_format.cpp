#include "jinja/value_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "jinja/error.h"
#include "jinja/unicode.h"

namespace nanovllm::jinja {

std::string format_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, laid out the way Python's repr does.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = std::stoi(sci.substr(e + 1));
  int decpt = exponent + 1;  // position of the decimal point relative to the digits
  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt)) + "." +
           digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

std::string string_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else if (c < 0x7F || is_py_printable(c)) {
      utf8_append(out, c);
    } else if (c <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else if (c <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<unsigned>(c));
    }
  }
  out += quote;
  return out;
}

namespace {

// Containers nested deeper than this fail instead of overflowing the stack (Python raises
// RecursionError far earlier).
constexpr int kMaxDepth = 500;

std::string repr_at(const Value& v, int depth);
std::string str_at(const Value& v, int depth);

std::string join_reprs(const ValueList& items, int depth) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += repr_at(items[i], depth + 1);
  }
  return out;
}

std::string sequence_repr(const Value& v, int depth) {
  const ListData& data = v.list_data();
  switch (data.flavor) {
    case SeqFlavor::List:
      return fmt::format("[{}]", join_reprs(data.items, depth));
    case SeqFlavor::Tuple:
      return fmt::format("({}{}", join_reprs(data.items, depth),
                         data.items.size() == 1 ? ",)" : ")");
    case SeqFlavor::DictItems:
      return fmt::format("dict_items([{}])", join_reprs(data.items, depth));
    case SeqFlavor::DictKeys:
      return fmt::format("dict_keys([{}])", join_reprs(data.items, depth));
    case SeqFlavor::DictValues:
      return fmt::format("dict_values([{}])", join_reprs(data.items, depth));
    case SeqFlavor::Range:
      return data.range_step == 1 ? fmt::format("range({}, {})", data.range_start, data.range_stop)
                                  : fmt::format("range({}, {}, {})", data.range_start,
                                                data.range_stop, data.range_step);
  }
  return {};
}

std::string dict_repr(const DictData& d, int depth) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, val] : d.entries) {
    if (!first) out += ", ";
    first = false;
    out += repr_at(k, depth + 1) + ": " + repr_at(val, depth + 1);
  }
  return out + "}";
}

std::string repr_at(const Value& v, int depth) {
  if (depth > kMaxDepth) runtime_fail("maximum nesting depth exceeded while printing a value");
  switch (v.kind()) {
    case Value::Kind::String:
      return v.is_markup() ? "Markup(" + string_repr(v.str()) + ")" : string_repr(v.str());
    case Value::Kind::Undefined:
      return "Undefined";
    default:
      return str_at(v, depth);
  }
}

std::string str_at(const Value& v, int depth) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::None:
      return "None";
    case Value::Kind::Bool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::Int:
      return std::to_string(v.as_int());
    case Value::Kind::Float:
      return format_float_repr(v.as_double());
    case Value::Kind::String:
      return v.str();
    case Value::Kind::List:
      return sequence_repr(v, depth);
    case Value::Kind::Dict:
      return dict_repr(v.dict_data(), depth);
    case Value::Kind::Object:
      if (v.obj().is_namespace) {
        DictData d;
        for (const auto& [k, val] : v.obj().attrs) d.set(Value(k), val);
        return "<Namespace " + dict_repr(d, depth) + ">";
      }
      runtime_fail("cannot print a '" + v.type_name() + "' object");
    case Value::Kind::Callable:
      runtime_fail("cannot print the function '" + v.fn().name + "'");
    case Value::Kind::Iterator:
      runtime_fail("cannot print a generator; convert it with |list or |join first");
  }
  return {};
}

}  // namespace

std::string python_repr(const Value& v) {
  return repr_at(v, 0);
}
std::string python_str(const Value& v) {
  return str_at(v, 0);
}

}  // namespace nanovllm::jinja
