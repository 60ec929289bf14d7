#include "jinja/operators.h"

#include <cmath>
#include <limits>

#include "jinja/error.h"
#include "jinja/format.h"
#include "jinja/value_format.h"

namespace nanovllm::jinja {

void fail_undefined(const Value& undefined) {
  const std::string& hint = undefined.undefined_hint();
  runtime_fail(hint.empty() ? "value is undefined" : hint);
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) runtime_fail("integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) runtime_fail("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0) runtime_fail("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  runtime_fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
               b.type_name() + "'");
}

using OverflowOp = bool (*)(int64_t, int64_t, int64_t*);

// Applies a __builtin_*_overflow operation, failing where Python would grow past 64 bits.
int64_t checked(OverflowOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op(a, b, &r)) runtime_fail("integer overflow: results beyond 64 bits are not supported");
  return r;
}

bool add_overflow(int64_t a, int64_t b, int64_t* r) {
  return __builtin_add_overflow(a, b, r);
}
bool sub_overflow(int64_t a, int64_t b, int64_t* r) {
  return __builtin_sub_overflow(a, b, r);
}
bool mul_overflow(int64_t a, int64_t b, int64_t* r) {
  return __builtin_mul_overflow(a, b, r);
}

// Python's float divmod, which gives the remainder the sign of the divisor.
std::pair<double, double> float_divmod(double a, double b, const char* what) {
  if (b == 0) runtime_fail(std::string("float ") + what + " by zero");
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  return {floordiv, mod};
}

Value int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) runtime_fail("0.0 cannot be raised to a negative power");
    return Value(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  int64_t b = base;
  while (exp > 0) {
    if (exp & 1) result = checked(mul_overflow, result, b);
    exp >>= 1;
    if (exp > 0) b = checked(mul_overflow, b, b);
  }
  return Value(result);
}

Value repeat(const Value& seq, int64_t times) {
  if (times > 0) {
    check_built_size(seq.is_string() ? seq.str().size() : seq.items().size(),
                     static_cast<uint64_t>(times));
  }
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return seq.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
  }
  ValueList out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.list_data().flavor);
}

bool is_plain_sequence(const Value& v) {
  return v.is_list() && (v.list_data().flavor == SeqFlavor::List || v.is_tuple());
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  // str % x formats str(x), and an Undefined's str() is "".
  if (op == "%" && a.is_string()) return percent_format_value(a, b);
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    bool floats = a.is_float() || b.is_float();
    if (op == "/") {
      double d = b.as_double();
      if (d == 0) runtime_fail("division by zero");
      return Value(a.as_double() / d);
    }
    if (floats) {
      double x = a.as_double(), y = b.as_double();
      if (op == "+") return Value(x + y);
      if (op == "-") return Value(x - y);
      if (op == "*") return Value(x * y);
      if (op == "//") return Value(float_divmod(x, y, "floor division").first);
      if (op == "%") return Value(float_divmod(x, y, "modulo").second);
      if (op == "**") {
        if (x == 0 && y < 0) runtime_fail("0.0 cannot be raised to a negative power");
        if (x < 0 && y != std::floor(y)) runtime_fail("complex results are not supported");
        return Value(std::pow(x, y));
      }
    } else {
      int64_t x = a.as_int(), y = b.as_int();
      if (op == "+") return Value(checked(add_overflow, x, y));
      if (op == "-") return Value(checked(sub_overflow, x, y));
      if (op == "*") return Value(checked(mul_overflow, x, y));
      if (op == "//") return Value(floor_div(x, y));
      if (op == "%") return Value(floor_mod(x, y));
      if (op == "**") return int_pow(x, y);
    }
    unsupported(op, a, b);
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      // Markup + str escapes the plain side, as markupsafe does.
      if (a.is_markup() || b.is_markup()) {
        return Value::markup((a.is_markup() ? a.str() : html_escape(a.str())) +
                             (b.is_markup() ? b.str() : html_escape(b.str())));
      }
      return Value(a.str() + b.str());
    }
    if (is_plain_sequence(a) && is_plain_sequence(b) && a.is_tuple() == b.is_tuple()) {
      ValueList out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(out), a.list_data().flavor);
    }
    if (a.is_string()) {
      runtime_fail("can only concatenate str (not \"" + b.type_name() + "\") to str");
    }
  }
  if (op == "*") {
    if ((a.is_string() || is_plain_sequence(a)) && (b.is_int() || b.is_bool()))
      return repeat(a, b.as_int());
    if ((b.is_string() || is_plain_sequence(b)) && (a.is_int() || a.is_bool()))
      return repeat(b, a.as_int());
  }
  unsupported(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return Value(-v.as_double());
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) runtime_fail("integer overflow");
    return Value(-v.as_int());
  }
  runtime_fail("bad operand type for unary -: '" + v.type_name() + "'");
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return v;
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  runtime_fail("bad operand type for unary +: '" + v.type_name() + "'");
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string())
    return a.str() < b.str();  // UTF-8 bytes sort like code points
  if (is_plain_sequence(a) && is_plain_sequence(b) && a.is_tuple() == b.is_tuple()) {
    const ValueList& x = a.items();
    const ValueList& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!values_equal(x[i], y[i])) return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  runtime_fail("'<' not supported between instances of '" + a.type_name() + "' and '" +
               b.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined:
      return false;
    case Value::Kind::String:
      if (!item.is_string()) {
        runtime_fail("'in <string>' requires string as left operand, not " + item.type_name());
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
      if (container.list_data().flavor == SeqFlavor::DictItems && !item.is_tuple()) return false;
      for (const Value& v : container.items()) {
        if (values_equal(v, item)) return true;
      }
      return false;
    case Value::Kind::Dict:
      if ((item.is_list() && item.list_data().flavor == SeqFlavor::List) || item.is_dict()) {
        runtime_fail("unhashable type: '" + item.type_name() + "'");
      }
      return container.dict_data().find(item) != nullptr;
    case Value::Kind::Iterator: {
      IteratorState& st = container.iter_state();
      while (st.position < st.items.size()) {
        if (values_equal(st.items[st.position++], item)) return true;
      }
      return false;
    }
    default:
      runtime_fail("argument of type '" + container.type_name() + "' is not iterable");
  }
}

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  if (op == "<") return less_than(a, b);
  if (op == ">") return less_than(b, a);
  if (op == "<=") return less_than(a, b) || values_equal(a, b);
  if (op == ">=") return less_than(b, a) || values_equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  runtime_fail("unknown comparison operator " + op);
}

}  // namespace nanovllm::jinja
