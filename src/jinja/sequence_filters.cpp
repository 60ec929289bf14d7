// Filters on sequences and mappings: first/last/join/sort/unique/map/select/... Like jinja2,
// map, select, reject, selectattr, rejectattr, unique, items and reverse return one-shot
// generators.
#include <algorithm>

#include "jinja/args.h"
#include "jinja/attributes.h"
#include "jinja/error.h"
#include "jinja/evaluator.h"
#include "jinja/filters.h"
#include "jinja/operators.h"
#include "jinja/unicode.h"
#include "jinja/value_format.h"

namespace nanovllm::jinja {

namespace {

// jinja2's make_attrgetter: "a.b.0" looked up item by item.
Value lookup_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = get_item(cur, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value fold_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.str()));
  return v;
}

// Sort key: an attribute path (or comma-separated paths) of each item, case-folded unless asked.
Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  if (attribute.is_undefined() || attribute.is_none()) return fold_case(item, case_sensitive);
  if (attribute.is_int()) return fold_case(get_item(item, attribute), case_sensitive);
  std::string attrs = python_str(attribute);
  if (attrs.find(',') == std::string::npos)
    return fold_case(lookup_path(item, attrs), case_sensitive);
  ValueList parts;
  size_t start = 0;
  while (true) {
    size_t comma = attrs.find(',', start);
    parts.push_back(
        fold_case(lookup_path(item, attrs.substr(start, comma - start)), case_sensitive));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Value::list(std::move(parts));
}

Value f_length(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("length", args, {});
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return Value(0);
    case Value::Kind::String:
      return Value(static_cast<int64_t>(codepoint_count(v.str())));
    case Value::Kind::List:
      return Value(static_cast<int64_t>(v.items().size()));
    case Value::Kind::Dict:
      return Value(static_cast<int64_t>(v.dict_data().entries.size()));
    default:
      runtime_fail("object of type '" + v.type_name() + "' has no len()");
  }
}

Value f_first(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("first", args, {});
  if (v.is_iterator()) {
    IteratorState& st = v.iter_state();
    if (st.position < st.items.size()) return st.items[st.position++];
    return Value::undefined("No first item, sequence was empty.");
  }
  ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("last", args, {});
  if (v.is_iterator()) runtime_fail("'generator' object is not reversible");
  ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_list(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("list", args, {});
  return Value::list(iterate(v));
}

Value f_join(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("join", args, {"d", "attribute"});
  std::string sep = a.has(0) ? python_str(a.get(0)) : "";
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += python_str(a.has(1) && !a.get(1).is_none() ? sort_key(item, a.get(1), true) : item);
    check_built_size(out.size());
  }
  return Value(std::move(out));
}

Value f_items(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("items", args, {});
  if (v.is_undefined()) return Value::iterator({});
  if (!v.is_dict()) runtime_fail("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, val] : v.dict_data().entries) out.push_back(Value::tuple({k, val}));
  return Value::iterator(std::move(out));
}

Value f_reverse(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("reverse", args, {});
  if (v.is_string()) {
    std::u32string cps = utf8_decode(v.str());
    std::reverse(cps.begin(), cps.end());
    return v.is_markup() ? Value::markup(utf8_encode(cps)) : Value(utf8_encode(cps));
  }
  // reversed() works on all of these (an Undefined too); only generators fall back to a list.
  bool reversible = v.is_dict() || v.is_list() || v.is_undefined();
  ValueList items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (reversible) return Value::iterator(std::move(items));  // Python's reversed() iterator
  return Value::list(std::move(items));                      // jinja2 falls back to a list
}

Value f_sort(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("sort", args, {"reverse", "case_sensitive", "attribute"});
  bool reverse = a.get_bool(0, false);
  bool case_sensitive = a.get_bool(1, false);
  ValueList items = iterate(v);
  // jinja2 sorts by a list of keys (one per attribute), so equal items such as None or
  // Undefined are never compared with `<`.
  const Value& attribute = a.get(2);
  bool several = attribute.is_string() && attribute.str().find(',') != std::string::npos;
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    Value key = sort_key(item, attribute, case_sensitive);
    keyed.emplace_back(several ? std::move(key) : Value::list({std::move(key)}), item);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less_than(y.first, x.first) : less_than(x.first, y.first);
  });
  ValueList out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

Value f_unique(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("unique", args, {"case_sensitive", "attribute"});
  bool case_sensitive = a.get_bool(0, false);
  ValueList seen, out;
  for (const Value& item : iterate(v)) {
    Value key = sort_key(item, a.get(1), case_sensitive);
    if ((key.is_list() && !key.is_tuple()) || key.is_dict()) {
      runtime_fail("unhashable type: '" + key.type_name() + "'");
    }
    if (std::none_of(seen.begin(), seen.end(),
                     [&](const Value& s) { return values_equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::iterator(std::move(out));
}

Value min_or_max(const Value& v, CallArgs& args, bool want_max) {
  BoundArgs a(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  bool case_sensitive = a.get_bool(0, false);
  ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(items[0], a.get(1), case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(items[i], a.get(1), case_sensitive);
    if (want_max ? less_than(best_key, key) : less_than(key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value f_min(Evaluator&, const Value& v, CallArgs& args) {
  return min_or_max(v, args, false);
}
Value f_max(Evaluator&, const Value& v, CallArgs& args) {
  return min_or_max(v, args, true);
}

Value f_sum(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("sum", args, {"attribute", "start"});
  Value total = a.get_or(1, Value(0));
  for (const Value& item : iterate(v)) {
    Value x = a.has(0) && !a.get(0).is_none() ? sort_key(item, a.get(0), true) : item;
    total = binary_op("+", total, x);
  }
  return total;
}

// map(attribute='x', default=...) or map('filter', args...)
// jinja2's map/select/reject skip falsy inputs (None, '', 0) instead of iterating them.
ValueList iterate_if_truthy(const Value& v) {
  return v.truthy() ? iterate(v) : ValueList{};
}

Value f_map(Evaluator& ev, const Value& v, CallArgs& args) {
  ValueList items = iterate_if_truthy(v);
  ValueList out;
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [k, val] : args.keyword) {
    if (k == "attribute") attribute = &val;
    if (k == "default") fallback = &val;
  }
  if (args.positional.empty() && attribute) {
    for (const auto& [k, val] : args.keyword) {
      if (k != "attribute" && k != "default")
        runtime_fail("Unexpected keyword argument '" + k + "'");
    }
    for (const Value& item : items) {
      Value x = sort_key(item, *attribute, true);
      if (x.is_undefined() && fallback && !fallback->is_none()) x = *fallback;
      out.push_back(std::move(x));
    }
    return Value::iterator(std::move(out));
  }
  if (args.positional.empty()) runtime_fail("map requires a filter argument");
  std::string name = python_str(args.positional[0]);
  CallArgs rest{ValueList(args.positional.begin() + 1, args.positional.end()), args.keyword};
  for (const Value& item : items) {
    CallArgs call = rest;
    out.push_back(ev.apply_filter(name, item, call));
  }
  return Value::iterator(std::move(out));
}

// select/reject/selectattr/rejectattr share this: an optional attribute, then an optional test.
Value select_items(Evaluator& ev, const Value& v, CallArgs& args, bool want, bool by_attribute) {
  size_t off = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) runtime_fail("Missing parameter for attribute name");
    attribute = python_str(args.positional[0]);
    off = 1;
  }
  bool has_test = args.positional.size() > off;
  std::string test = has_test ? python_str(args.positional[off]) : "";
  CallArgs test_args{ValueList(args.positional.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                             off + 1, args.positional.size())),
                               args.positional.end()),
                     args.keyword};
  ValueList out;
  for (const Value& item : iterate_if_truthy(v)) {
    Value x = by_attribute ? lookup_path(item, attribute) : item;
    bool ok;
    if (has_test) {
      CallArgs call = test_args;
      ok = ev.apply_test(test, x, call);
    } else {
      ok = x.truthy();
    }
    if (ok == want) out.push_back(item);
  }
  return Value::iterator(std::move(out));
}

Value f_select(Evaluator& ev, const Value& v, CallArgs& args) {
  return select_items(ev, v, args, true, false);
}
Value f_reject(Evaluator& ev, const Value& v, CallArgs& args) {
  return select_items(ev, v, args, false, false);
}
Value f_selectattr(Evaluator& ev, const Value& v, CallArgs& args) {
  return select_items(ev, v, args, true, true);
}
Value f_rejectattr(Evaluator& ev, const Value& v, CallArgs& args) {
  return select_items(ev, v, args, false, true);
}

Value f_dictsort(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("dictsort", args, {"case_sensitive", "by", "reverse"});
  bool case_sensitive = a.get_bool(0, false);
  std::string by = a.get_string(1).value_or("key");
  if (by != "key" && by != "value")
    runtime_fail("You can only sort by either \"key\" or \"value\"");
  bool reverse = a.get_bool(2, false);
  if (!v.is_dict()) runtime_fail("dictsort(): value must be a mapping");
  std::vector<std::pair<Value, Value>> entries = v.dict_data().entries;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    Value kx = fold_case(by == "key" ? x.first : x.second, case_sensitive);
    Value ky = fold_case(by == "key" ? y.first : y.second, case_sensitive);
    return reverse ? less_than(ky, kx) : less_than(kx, ky);
  });
  ValueList out;
  for (auto& [k, val] : entries) out.push_back(Value::tuple({k, val}));
  return Value::list(std::move(out));
}

Value f_batch(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("batch", args, {"linecount", "fill_with"}, 1);
  int64_t count = a.get_int(0).value_or(0);
  if (count <= 0) runtime_fail("batch(): linecount must be positive");
  ValueList out, tmp;
  for (const Value& item : iterate(v)) {
    if (static_cast<int64_t>(tmp.size()) == count) {
      out.push_back(Value::list(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(item);
  }
  if (!tmp.empty()) {
    if (a.has(1) && !a.get(1).is_none()) {
      while (static_cast<int64_t>(tmp.size()) < count) tmp.push_back(a.get(1));
    }
    out.push_back(Value::list(std::move(tmp)));
  }
  return Value::iterator(std::move(out));
}

}  // namespace

const FilterTable& sequence_filters() {
  static const FilterTable table = {
      {"length", f_length},
      {"count", f_length},
      {"first", f_first},
      {"last", f_last},
      {"list", f_list},
      {"join", f_join},
      {"items", f_items},
      {"reverse", f_reverse},
      {"sort", f_sort},
      {"unique", f_unique},
      {"min", f_min},
      {"max", f_max},
      {"sum", f_sum},
      {"map", f_map},
      {"select", f_select},
      {"reject", f_reject},
      {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr},
      {"dictsort", f_dictsort},
      {"batch", f_batch},
  };
  return table;
}

}  // namespace nanovllm::jinja
