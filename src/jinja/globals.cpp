#include "jinja/globals.h"

#include <fmt/format.h>

#include <ctime>

#include "jinja/args.h"
#include "jinja/error.h"
#include "jinja/value_format.h"

namespace nanovllm::jinja {

namespace {

// jinja2's sandbox refuses ranges longer than this.
constexpr int64_t kMaxRange = 100000;

Value range_fn(Evaluator&, CallArgs& args) {
  if (!args.keyword.empty()) runtime_fail("range() takes no keyword arguments");
  const ValueList& p = args.positional;
  if (p.empty() || p.size() > 3) runtime_fail("range expected 1 to 3 arguments");
  for (const Value& v : p) {
    if (!(v.is_int() || v.is_bool())) {
      runtime_fail(fmt::format("'{}' object cannot be interpreted as an integer", v.type_name()));
    }
  }
  int64_t start = 0, stop = 0, step = 1;
  if (p.size() == 1) {
    stop = p[0].as_int();
  } else {
    start = p[0].as_int();
    stop = p[1].as_int();
    if (p.size() == 3) step = p[2].as_int();
  }
  if (step == 0) runtime_fail("range() arg 3 must not be zero");
  // Length computed as Python does, in 128 bits so that extreme bounds cannot overflow.
  __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  __int128 abs_step = step > 0 ? step : -static_cast<__int128>(step);
  __int128 length = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
  if (length > kMaxRange) {
    runtime_fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  return Value::range(start, stop, step);
}

// dict(mapping or pairs, **kwargs) as Python builds it.
DictData build_dict(const CallArgs& args, const char* function) {
  if (args.positional.size() > 1)
    runtime_fail(std::string(function) + " expected at most 1 positional argument");
  DictData d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      d = src.dict_data();
    } else {
      for (const Value& pair : iterate(src)) {
        ValueList kv = iterate(pair);
        if (kv.size() != 2) runtime_fail("dictionary update sequence element has the wrong length");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.set(Value(k), v);
  return d;
}

Value namespace_fn(Evaluator&, CallArgs& args) {
  DictData d = build_dict(args, "namespace");
  auto ns = std::make_shared<Object>();
  ns->type_name = "Namespace";
  ns->is_namespace = true;
  for (const auto& [k, v] : d.entries) {
    if (!k.is_string()) runtime_fail("namespace attribute names must be strings");
    if (!k.str().empty() && k.str()[0] == '_') {
      runtime_fail(
          "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
          k.str() + "'. Please rename the attribute.");
    }
    ns->set(k.str(), v);
  }
  return Value::object(std::move(ns));
}

Value dict_fn(Evaluator&, CallArgs& args) {
  return Value::dict(build_dict(args, "dict"));
}

Value raise_exception_fn(Evaluator&, CallArgs& args) {
  BoundArgs a("raise_exception", args, {"message"}, 1);
  throw RuntimeFailure(python_str(a.get(0)), /*raised_by_template=*/true);
}

Value strftime_now_fn(Evaluator&, CallArgs& args) {
  BoundArgs a("strftime_now", args, {"format"}, 1);
  auto format = a.get_string(0);
  if (!format) runtime_fail("strftime_now() argument must be str");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  if (format->empty()) return Value("");
  std::string buf(256 + format->size() * 8, '\0');
  size_t n = std::strftime(buf.data(), buf.size(), format->c_str(), &local);
  if (n == 0) runtime_fail("strftime_now(): the formatted date is too long or empty");
  buf.resize(n);
  return Value(std::move(buf));
}

}  // namespace

std::optional<Value> builtin_global(const std::string& name) {
  if (name == "range") return Value::callable("range", range_fn);
  if (name == "namespace") return Value::callable("namespace", namespace_fn);
  if (name == "dict") return Value::callable("dict", dict_fn);
  if (name == "raise_exception") return Value::callable("raise_exception", raise_exception_fn);
  if (name == "strftime_now") return Value::callable("strftime_now", strftime_now_fn);
  return std::nullopt;
}

}  // namespace nanovllm::jinja
