// The runtime value of the template engine, modelled on the Python objects jinja2 works with:
// Undefined vs None, bool/int/float kept apart, insertion-ordered dicts, tuples, one-shot
// iterators.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace nanovllm::jinja {

class Value;
class Evaluator;

using ValueList = std::vector<Value>;

// Arguments of a call: positional, then keyword in source order.
struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFunction = std::function<Value(Evaluator&, CallArgs&)>;

struct Callable {
  std::string name;
  NativeFunction fn;
};

// Attribute bag: jinja2's Namespace (mutable through `set ns.x = ...`) and the loop object.
struct Object {
  std::string type_name;
  std::vector<std::pair<std::string, Value>> attrs;
  bool is_namespace = false;

  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
};

// Python's dict views and ranges print differently from lists but otherwise behave like
// them here.
enum class SeqFlavor : uint8_t { List, Tuple, DictItems, DictKeys, DictValues, Range };

struct ListData {
  ValueList items;
  SeqFlavor flavor = SeqFlavor::List;
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // for a Range
};

// Insertion-ordered mapping with Python key semantics (1, 1.0 and True are one key).
struct DictData {
  std::vector<std::pair<Value, Value>> entries;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

// A generator (select, map, reverse, ...): iterating it consumes it, as in Python.
struct IteratorState {
  ValueList items;
  size_t position = 0;
};

class Value {
 public:
  enum class Kind : uint8_t {
    Undefined,
    None,
    Bool,
    Int,
    Float,
    String,
    List,
    Dict,
    Object,
    Callable,
    Iterator
  };

  Value() = default;  // Undefined
  static Value undefined(std::string hint = {});
  static Value none();
  Value(bool b);
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(int64_t i);
  Value(double d);
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::string s);
  static Value markup(std::string s);  // a string jinja2 would hold as Markup (from `safe`)
  static Value list(ValueList items, SeqFlavor flavor = SeqFlavor::List);
  static Value tuple(ValueList items) { return list(std::move(items), SeqFlavor::Tuple); }
  // Python's range(start, stop, step); step != 0.
  static Value range(int64_t start, int64_t stop, int64_t step);
  static Value dict(DictData data = {});
  static Value object(std::shared_ptr<Object> obj);
  static Value callable(std::string name, NativeFunction fn);
  static Value iterator(ValueList items);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  // Python's numbers include bool.
  bool is_number() const {
    return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool;
  }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const { return kind_ == Kind::List && list_data().flavor == SeqFlavor::Tuple; }
  // A list, tuple or range: indexable like a Python sequence (dict views are not).
  bool is_indexable_sequence() const {
    return kind_ == Kind::List &&
           (list_data().flavor == SeqFlavor::List || list_data().flavor == SeqFlavor::Tuple ||
            list_data().flavor == SeqFlavor::Range);
  }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_callable() const { return kind_ == Kind::Callable; }
  bool is_iterator() const { return kind_ == Kind::Iterator; }
  bool is_markup() const { return kind_ == Kind::String && markup_; }

  bool as_bool() const { return std::get<bool>(payload_); }
  // Integer value of an int or bool.
  int64_t as_int() const {
    return kind_ == Kind::Bool ? (as_bool() ? 1 : 0) : std::get<int64_t>(payload_);
  }
  // Numeric value of an int, bool or float.
  double as_double() const {
    return kind_ == Kind::Float ? std::get<double>(payload_) : static_cast<double>(as_int());
  }
  const std::string& str() const { return *std::get<std::shared_ptr<const std::string>>(payload_); }
  // The name an Undefined stands for, used in error messages ("'foo' is undefined").
  const std::string& undefined_hint() const { return str(); }
  const ListData& list_data() const { return *std::get<std::shared_ptr<const ListData>>(payload_); }
  const ValueList& items() const { return list_data().items; }
  const DictData& dict_data() const { return *std::get<std::shared_ptr<const DictData>>(payload_); }
  Object& obj() const { return *std::get<std::shared_ptr<Object>>(payload_); }
  const Callable& fn() const { return *std::get<std::shared_ptr<const Callable>>(payload_); }
  IteratorState& iter_state() const { return *std::get<std::shared_ptr<IteratorState>>(payload_); }
  // Identity, for objects (Python `is`).
  const void* identity() const;

  // Python truthiness (a generator is always true, an Undefined always false).
  bool truthy() const;
  // Python's type name, for error messages ("int", "str", "dict", ...).
  std::string type_name() const;

 private:
  using Payload = std::variant<std::monostate, bool, int64_t, double,
                               std::shared_ptr<const std::string>, std::shared_ptr<const ListData>,
                               std::shared_ptr<const DictData>, std::shared_ptr<Object>,
                               std::shared_ptr<const Callable>, std::shared_ptr<IteratorState>>;
  Value(Kind kind, Payload payload) : kind_(kind), payload_(std::move(payload)) {}

  Kind kind_ = Kind::Undefined;
  bool markup_ = false;
  Payload payload_;  // a string also holds an Undefined's hint (the name that was missing)
};

// Python `==` (numbers across int/float/bool, lists vs tuples unequal, Undefined == Undefined).
bool values_equal(const Value& a, const Value& b);

// The elements a for loop sees: list items, dict keys, string characters; consumes iterators.
// Throws on values Python cannot iterate.
ValueList iterate(const Value& v);

}  // namespace nanovllm::jinja
