#include "jinja/tests.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "jinja/args.h"
#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/operators.h"
#include "jinja/string_ops.h"
#include "jinja/unicode.h"
#include "jinja/value_format.h"

namespace nanovllm::jinja {

namespace {

void no_args(const char* name, const CallArgs& args) {
  BoundArgs(name, args, {});
}

// jinja2: value % 2 == 1 / value % 2 == 0 (so 2.5 is neither odd nor even).
bool t_odd(Evaluator&, const Value& v, CallArgs& a) {
  no_args("odd", a);
  return values_equal(binary_op("%", v, Value(2)), Value(1));
}
bool t_even(Evaluator&, const Value& v, CallArgs& a) {
  no_args("even", a);
  return values_equal(binary_op("%", v, Value(2)), Value(0));
}

bool t_divisibleby(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("divisibleby", args, {"num"}, 1);
  Value r = binary_op("%", v, a.get(0));
  return !r.truthy();
}

bool t_defined(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("defined", a), !v.is_undefined();
}
bool t_undefined(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("undefined", a), v.is_undefined();
}
bool t_none(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("none", a), v.is_none();
}
bool t_boolean(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("boolean", a), v.is_bool();
}
bool t_false(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("false", a), v.is_bool() && !v.as_bool();
}
bool t_true(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("true", a), v.is_bool() && v.as_bool();
}
bool t_integer(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("integer", a), v.is_int();
}
bool t_float(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("float", a), v.is_float();
}
bool t_number(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("number", a), v.is_number();
}
bool t_string(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("string", a), v.is_string();
}
bool t_mapping(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("mapping", a), v.is_dict();
}

// Has len() and indexing, as Python sees it.
bool t_sequence(Evaluator&, const Value& v, CallArgs& a) {
  no_args("sequence", a);
  if (v.is_list()) return v.is_indexable_sequence();
  return v.is_string() || v.is_dict() || v.is_undefined();
}

bool t_iterable(Evaluator&, const Value& v, CallArgs& a) {
  no_args("iterable", a);
  return v.is_string() || v.is_list() || v.is_dict() || v.is_iterator() || v.is_undefined();
}

bool t_callable(Evaluator&, const Value& v, CallArgs& a) {
  no_args("callable", a);
  return v.is_callable() || v.is_undefined() || (v.is_object() && !v.obj().is_namespace);
}

bool t_lower(Evaluator&, const Value& v, CallArgs& a) {
  no_args("lower", a);
  bool cased = false;
  for (char32_t c : utf8_decode(python_str(v))) {
    if (is_upper(c)) return false;
    cased = cased || is_cased(c);
  }
  return cased;
}

bool t_upper(Evaluator&, const Value& v, CallArgs& a) {
  no_args("upper", a);
  bool cased = false;
  for (char32_t c : utf8_decode(python_str(v))) {
    if (is_lower(c)) return false;
    cased = cased || is_cased(c);
  }
  return cased;
}

bool t_escaped(Evaluator&, const Value& v, CallArgs& a) {
  return no_args("escaped", a), v.is_markup();
}

bool t_sameas(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("sameas", args, {"other"}, 1);
  const Value& o = a.get(0);
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::None:
      return true;
    case Value::Kind::Bool:
      return v.as_bool() == o.as_bool();
    case Value::Kind::Int:  // CPython caches small ints, the usual reason to compare them by `is`
      return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    default:
      return v.identity() != nullptr && v.identity() == o.identity();
  }
}

bool compare_test(const char* name, const char* op, const Value& v, const CallArgs& args) {
  BoundArgs a(name, args, {"other"}, 1);
  return compare_op(op, v, a.get(0));
}

bool t_eq(Evaluator&, const Value& v, CallArgs& a) {
  return compare_test("eq", "==", v, a);
}
bool t_ne(Evaluator&, const Value& v, CallArgs& a) {
  return compare_test("ne", "!=", v, a);
}
bool t_lt(Evaluator&, const Value& v, CallArgs& a) {
  return compare_test("lt", "<", v, a);
}
bool t_le(Evaluator&, const Value& v, CallArgs& a) {
  return compare_test("le", "<=", v, a);
}
bool t_gt(Evaluator&, const Value& v, CallArgs& a) {
  return compare_test("gt", ">", v, a);
}
bool t_ge(Evaluator&, const Value& v, CallArgs& a) {
  return compare_test("ge", ">=", v, a);
}
bool t_in(Evaluator&, const Value& v, CallArgs& a) {
  return compare_test("in", "in", v, a);
}

bool t_filter(Evaluator&, const Value& v, CallArgs& a) {
  no_args("filter", a);
  return v.is_string() && find_filter(v.str()) != nullptr;
}

bool t_test(Evaluator&, const Value& v, CallArgs& a) {
  no_args("test", a);
  return v.is_string() && find_test(v.str()) != nullptr;
}

const std::vector<std::pair<const char*, TestFn>>& test_table() {
  static const std::vector<std::pair<const char*, TestFn>> table = {
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"false", t_false},
      {"true", t_true},
      {"integer", t_integer},
      {"float", t_float},
      {"number", t_number},
      {"string", t_string},
      {"mapping", t_mapping},
      {"sequence", t_sequence},
      {"iterable", t_iterable},
      {"callable", t_callable},
      {"lower", t_lower},
      {"upper", t_upper},
      {"escaped", t_escaped},
      {"sameas", t_sameas},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"in", t_in},
      {"filter", t_filter},
      {"test", t_test},
  };
  return table;
}

}  // namespace

TestFn find_test(std::string_view name) {
  for (const auto& [n, fn] : test_table()) {
    if (name == n) return fn;
  }
  return nullptr;
}

}  // namespace nanovllm::jinja
