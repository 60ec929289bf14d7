#include <algorithm>
#include <unordered_set>

#include "jinja/args.h"
#include "jinja/error.h"
#include "jinja/format.h"
#include "jinja/methods.h"
#include "jinja/string_ops.h"
#include "jinja/unicode.h"
#include "jinja/value_format.h"

namespace nanovllm::jinja {

namespace {

using Method = Value (*)(const Value& self, const CallArgs& args);

Value make_list(const std::vector<std::string>& parts) {
  ValueList out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.emplace_back(p);
  return Value::list(std::move(out));
}

// s[start:end] by code points, for the optional start/end arguments of several methods.
std::string window(const std::string& s, const BoundArgs& a, size_t start_index) {
  if (!a.has(start_index) && !a.has(start_index + 1)) return s;
  std::u32string cps = utf8_decode(s);
  auto idx = slice_indices(cps.size(), a.get_int(start_index), a.get_int(start_index + 1), 1);
  std::u32string out;
  for (size_t i : idx) out.push_back(cps[i]);
  return utf8_encode(out);
}

Value affix_test(const Value& self, const CallArgs& args, bool prefix) {
  BoundArgs a(prefix ? "startswith" : "endswith", args, {"affix", "start", "end"}, 1);
  std::string s = window(self.str(), a, 1);
  auto matches = [&](const Value& v) {
    if (!v.is_string()) {
      runtime_fail(std::string(prefix ? "startswith" : "endswith") +
                   " first arg must be str or a tuple of str, not " + v.type_name());
    }
    const std::string& x = v.str();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  const Value& affix = a.get(0);
  if (affix.is_tuple()) {
    return Value(std::any_of(affix.items().begin(), affix.items().end(), matches));
  }
  return Value(matches(affix));
}

Value strip_method(const Value& self, const CallArgs& args, const char* name, bool left,
                   bool right) {
  BoundArgs a(name, args, {"chars"});
  return Value(py_strip(self.str(), a.get_string(0), left, right));
}

Value split_method(const Value& self, const CallArgs& args, bool from_right) {
  BoundArgs a(from_right ? "rsplit" : "split", args, {"sep", "maxsplit"});
  return make_list(py_split(self.str(), a.get_string(0), a.get_int(1).value_or(-1), from_right));
}

Value find_method(const Value& self, const CallArgs& args, const char* name, bool from_right,
                  bool raise) {
  BoundArgs a(name, args, {"sub", "start", "end"}, 1);
  auto sub = a.get_string(0);
  if (!sub) runtime_fail(std::string(name) + "() argument must be str");
  int64_t at = py_find(self.str(), *sub, a.get_int(1), a.get_int(2), from_right);
  if (at < 0 && raise) runtime_fail("substring not found");
  return Value(at);
}

template <bool (*Pred)(char32_t)>
Value char_class(const Value& self) {
  std::u32string cps = utf8_decode(self.str());
  return Value(!cps.empty() && std::all_of(cps.begin(), cps.end(), Pred));
}

bool is_alnum(char32_t c) {
  return is_alpha(c) || is_decimal_digit(c);
}

Value case_test(const Value& self, bool upper) {
  bool cased = false;
  for (char32_t c : utf8_decode(self.str())) {
    if (upper ? is_lower(c) : is_upper(c)) return Value(false);
    if (is_cased(c)) cased = true;
  }
  return Value(cased);
}

Value justify(const Value& self, const CallArgs& args, const char* name, int where) {
  BoundArgs a(name, args, {"width", "fillchar"}, 1);
  int64_t width = a.get_int(0).value_or(0);
  std::string fill = a.get_string(1).value_or(" ");
  if (codepoint_count(fill) != 1)
    runtime_fail("The fill character must be exactly one character long");
  int64_t len = static_cast<int64_t>(codepoint_count(self.str()));
  if (width <= len) return self;
  check_built_size(fill.size(), static_cast<uint64_t>(width));
  int64_t total = width - len;
  // Python's center puts the odd extra space on the left when the length is odd.
  int64_t left = where < 0 ? 0 : where > 0 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += self.str();
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return Value(std::move(out));
}

Value partition(const Value& self, const CallArgs& args, bool from_right) {
  BoundArgs a(from_right ? "rpartition" : "partition", args, {"sep"}, 1);
  auto sep = a.get_string(0);
  if (!sep || sep->empty()) runtime_fail("empty separator");
  const std::string& s = self.str();
  size_t at = from_right ? s.rfind(*sep) : s.find(*sep);
  if (at == std::string::npos) {
    return from_right ? Value::tuple({Value(""), Value(""), self})
                      : Value::tuple({self, Value(""), Value("")});
  }
  return Value::tuple({Value(s.substr(0, at)), Value(*sep), Value(s.substr(at + sep->size()))});
}

Value call_string_method(const std::string& name, const Value& self, const CallArgs& args) {
  const std::string& s = self.str();
  // Python's str methods take positional arguments only, except these.
  if (!args.keyword.empty() && name != "split" && name != "rsplit" && name != "splitlines" &&
      name != "format") {
    runtime_fail("str." + name + "() takes no keyword arguments");
  }
  auto no_args = [&](const char* n) { BoundArgs(n, args, {}); };
  if (name == "startswith") return affix_test(self, args, true);
  if (name == "endswith") return affix_test(self, args, false);
  if (name == "strip") return strip_method(self, args, "strip", true, true);
  if (name == "lstrip") return strip_method(self, args, "lstrip", true, false);
  if (name == "rstrip") return strip_method(self, args, "rstrip", false, true);
  if (name == "split") return split_method(self, args, false);
  if (name == "rsplit") return split_method(self, args, true);
  if (name == "splitlines") {
    BoundArgs a("splitlines", args, {"keepends"});
    return make_list(py_splitlines(s, a.get_bool(0, false)));
  }
  if (name == "upper") return no_args("upper"), Value(py_upper(s));
  if (name == "lower") return no_args("lower"), Value(py_lower(s));
  if (name == "title") return no_args("title"), Value(py_title(s));
  if (name == "capitalize") return no_args("capitalize"), Value(py_capitalize(s));
  if (name == "replace") {
    BoundArgs a("replace", args, {"old", "new", "count"}, 2);
    auto old_s = a.get_string(0), new_s = a.get_string(1);
    if (!old_s || !new_s) runtime_fail("replace() arguments must be str");
    return Value(py_replace(s, *old_s, *new_s, a.get_int(2).value_or(-1)));
  }
  if (name == "find") return find_method(self, args, "find", false, false);
  if (name == "rfind") return find_method(self, args, "rfind", true, false);
  if (name == "index") return find_method(self, args, "index", false, true);
  if (name == "rindex") return find_method(self, args, "rindex", true, true);
  if (name == "count") {
    BoundArgs a("count", args, {"sub", "start", "end"}, 1);
    auto sub = a.get_string(0);
    if (!sub) runtime_fail("count() argument must be str");
    return Value(py_count(s, *sub, a.get_int(1), a.get_int(2)));
  }
  if (name == "format") return Value(brace_format(s, args));
  if (name == "join") {
    BoundArgs a("join", args, {"iterable"}, 1);
    return Value(join_strings(iterate(a.get(0)), s));
  }
  if (name == "isalpha") return no_args("isalpha"), char_class<is_alpha>(self);
  if (name == "isdigit") return no_args("isdigit"), char_class<is_decimal_digit>(self);
  if (name == "isdecimal") return no_args("isdecimal"), char_class<is_decimal_digit>(self);
  if (name == "isalnum") return no_args("isalnum"), char_class<is_alnum>(self);
  if (name == "isspace") return no_args("isspace"), char_class<is_py_space>(self);
  if (name == "isupper") return no_args("isupper"), case_test(self, true);
  if (name == "islower") return no_args("islower"), case_test(self, false);
  if (name == "removeprefix" || name == "removesuffix") {
    BoundArgs a(name, args, {"affix"}, 1);
    auto affix = a.get_string(0);
    if (!affix) runtime_fail(name + "() argument must be str");
    bool prefix = name == "removeprefix";
    if (affix->size() <= s.size() &&
        (prefix ? s.compare(0, affix->size(), *affix) == 0
                : s.compare(s.size() - affix->size(), affix->size(), *affix) == 0)) {
      return Value(prefix ? s.substr(affix->size()) : s.substr(0, s.size() - affix->size()));
    }
    return self;
  }
  if (name == "center") return justify(self, args, "center", 0);
  if (name == "ljust") return justify(self, args, "ljust", -1);
  if (name == "rjust") return justify(self, args, "rjust", 1);
  if (name == "partition") return partition(self, args, false);
  if (name == "rpartition") return partition(self, args, true);
  runtime_fail("str." + name + "() is not supported by this template engine");
}

Value escaped(const Value& v) {
  return v.is_markup() ? v : Value::markup(html_escape(python_str(v)));
}

Value as_markup(const Value& v) {
  if (v.is_string()) return Value::markup(v.str());
  if (v.is_list()) {
    ValueList items;
    for (const Value& item : v.items()) items.push_back(as_markup(item));
    return Value::list(std::move(items), v.list_data().flavor);
  }
  return v;
}

// markupsafe's Markup methods: results stay Markup; replace's new text, fill characters, joined
// items and format arguments are HTML-escaped first.
Value call_markup_method(const std::string& name, const Value& self, const CallArgs& args) {
  static const std::unordered_set<std::string> plain_results = {
      "startswith", "endswith", "find",      "rfind",   "index",   "rindex",  "count",
      "isalpha",    "isdigit",  "isdecimal", "isalnum", "isspace", "isupper", "islower"};
  if (plain_results.count(name)) return call_string_method(name, self, args);
  CallArgs escaped_args = args;
  auto escape_positional = [&](size_t i) {
    if (i < escaped_args.positional.size() && escaped_args.positional[i].is_string()) {
      escaped_args.positional[i] = escaped(escaped_args.positional[i]);
    }
  };
  if (name == "replace") escape_positional(1);
  if (name == "ljust" || name == "rjust" || name == "center") escape_positional(1);
  if (name == "join" && !escaped_args.positional.empty()) {
    ValueList items;
    for (const Value& item : iterate(escaped_args.positional[0])) items.push_back(escaped(item));
    escaped_args.positional[0] = Value::list(std::move(items));
  }
  if (name == "format") {
    for (Value& v : escaped_args.positional) v = escaped(v);
    for (auto& [k, v] : escaped_args.keyword) v = escaped(v);
  }
  return as_markup(call_string_method(name, self, escaped_args));
}

const std::unordered_set<std::string>& python_string_methods() {
  static const std::unordered_set<std::string> names = {
      "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
      "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
      "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
      "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
      "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
      "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
      "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
      "swapcase",     "title",       "translate", "upper",      "zfill"};
  return names;
}

}  // namespace

std::string join_strings(const ValueList& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      runtime_fail("sequence item " + std::to_string(i) + ": expected str instance, " +
                   items[i].type_name() + " found");
    }
    if (i) out += separator;
    out += items[i].str();
    check_built_size(out.size());
  }
  return out;
}

std::optional<Value> string_method(const Value& self, const std::string& name) {
  if (!python_string_methods().count(name)) return std::nullopt;
  return Value::callable("str." + name, [self, name](Evaluator&, CallArgs& args) {
    return self.is_markup() ? call_markup_method(name, self, args)
                            : call_string_method(name, self, args);
  });
}

}  // namespace nanovllm::jinja
