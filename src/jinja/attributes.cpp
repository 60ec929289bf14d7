#include "jinja/attributes.h"

#include <fmt/format.h>

#include "jinja/error.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/string_ops.h"
#include "jinja/unicode.h"
#include "jinja/value_format.h"

namespace nanovllm::jinja {

namespace {

Value missing_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", obj.type_name(), name));
}

Value missing_element(const Value& obj, const Value& key) {
  if (key.is_string()) return missing_attribute(obj, key.str());
  return Value::undefined(
      fmt::format("'{} object' has no element {}", obj.type_name(), python_repr(key)));
}

// Python attributes only (methods, namespace attributes).
std::optional<Value> python_attribute(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::String:
      return string_method(obj, name);
    case Value::Kind::Dict:
      return dict_method(obj, name);
    case Value::Kind::List:
      if (obj.list_data().flavor == SeqFlavor::List || obj.is_tuple())
        return list_method(obj, name);
      return std::nullopt;
    case Value::Kind::Object:
      if (const Value* v = obj.obj().find(name)) return *v;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// Index into a list/tuple/str by a Python int; nullopt when out of range or not an int.
std::optional<Value> index_sequence(const Value& obj, const Value& key) {
  if (!(key.is_int() || key.is_bool())) return std::nullopt;
  int64_t i = key.as_int();
  if (obj.is_list()) {
    if (!obj.is_indexable_sequence()) return std::nullopt;
    int64_t n = static_cast<int64_t>(obj.items().size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return std::nullopt;
    return obj.items()[static_cast<size_t>(i)];
  }
  const std::string& s = obj.str();
  if (is_ascii(s)) {
    int64_t n = static_cast<int64_t>(s.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return std::nullopt;
    return Value(std::string(1, s[static_cast<size_t>(i)]));
  }
  std::u32string cps = utf8_decode(s);
  int64_t n = static_cast<int64_t>(cps.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) return std::nullopt;
  std::string out;
  utf8_append(out, cps[static_cast<size_t>(i)]);
  return Value(std::move(out));
}

std::optional<int64_t> slice_bound(const Value& v, bool* ok) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (v.is_int() || v.is_bool()) return v.as_int();
  *ok = false;
  return std::nullopt;
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (auto attr = python_attribute(obj, name)) return *attr;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_data().find(std::string_view(name))) return *v;
  }
  return missing_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_data().find(key)) return *v;
  } else if (obj.is_list() || obj.is_string()) {
    if (auto v = index_sequence(obj, key)) {
      return obj.is_markup() ? Value::markup(v->str()) : *v;
    }
  }
  // jinja2 falls back to an attribute lookup when the item lookup fails.
  if (key.is_string()) {
    if (auto attr = python_attribute(obj, key.str())) return *attr;
  }
  return missing_element(obj, key);
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  bool ok = true;
  auto b = slice_bound(start, &ok);
  auto e = slice_bound(stop, &ok);
  auto s = slice_bound(step, &ok);
  if (obj.is_list() && obj.list_data().flavor == SeqFlavor::Range && ok) {
    // A slice of a range is a range: range(r[i], r[j], r.step * k) with Python's clamping.
    const ListData& r = obj.list_data();
    SliceBounds sb = normalize_slice(r.items.size(), b, e, s);
    return Value::range(r.range_start + sb.start * r.range_step,
                        r.range_start + sb.stop * r.range_step, r.range_step * sb.step);
  }
  bool sliceable = obj.is_string() ||
                   (obj.is_list() && (obj.list_data().flavor == SeqFlavor::List || obj.is_tuple()));
  if (!ok || !sliceable)
    return Value::undefined(fmt::format("'{} object' cannot be sliced", obj.type_name()));
  if (obj.is_list()) {
    const ValueList& items = obj.items();
    ValueList out;
    for (size_t i : slice_indices(items.size(), b, e, s)) out.push_back(items[i]);
    return Value::list(std::move(out), obj.list_data().flavor);
  }
  std::u32string cps = utf8_decode(obj.str());
  std::u32string out;
  for (size_t i : slice_indices(cps.size(), b, e, s)) out.push_back(cps[i]);
  return obj.is_markup() ? Value::markup(utf8_encode(out)) : Value(utf8_encode(out));
}

}  // namespace nanovllm::jinja
