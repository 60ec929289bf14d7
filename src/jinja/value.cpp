#include "jinja/value.h"

#include <cmath>

#include "jinja/error.h"
#include "jinja/unicode.h"

namespace nanovllm::jinja {

Value Value::undefined(std::string hint) {
  return Value(Kind::Undefined, std::make_shared<const std::string>(std::move(hint)));
}
Value Value::none() {
  return Value(Kind::None, std::monostate{});
}
Value::Value(bool b) : kind_(Kind::Bool), payload_(b) {}
Value::Value(int64_t i) : kind_(Kind::Int), payload_(i) {}
Value::Value(double d) : kind_(Kind::Float), payload_(d) {}
Value::Value(std::string s)
    : kind_(Kind::String), payload_(std::make_shared<const std::string>(std::move(s))) {}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::list(ValueList items, SeqFlavor flavor) {
  return Value(Kind::List,
               std::make_shared<const ListData>(ListData{std::move(items), flavor, 0, 0, 1}));
}

Value Value::range(int64_t start, int64_t stop, int64_t step) {
  ValueList items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.emplace_back(i);
  return Value(Kind::List, std::make_shared<const ListData>(
                               ListData{std::move(items), SeqFlavor::Range, start, stop, step}));
}

Value Value::dict(DictData data) {
  return Value(Kind::Dict, std::make_shared<const DictData>(std::move(data)));
}

Value Value::object(std::shared_ptr<Object> obj) {
  return Value(Kind::Object, std::move(obj));
}

Value Value::callable(std::string name, NativeFunction fn) {
  return Value(Kind::Callable,
               std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)}));
}

Value Value::iterator(ValueList items) {
  return Value(Kind::Iterator, std::make_shared<IteratorState>(IteratorState{std::move(items), 0}));
}

const void* Value::identity() const {
  return std::visit(
      [](const auto& p) -> const void* {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, std::monostate> || std::is_same_v<P, bool> ||
                      std::is_same_v<P, int64_t> || std::is_same_v<P, double>) {
          return nullptr;
        } else {
          return p.get();
        }
      },
      payload_);
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return as_bool();
    case Kind::Int:
      return as_int() != 0;
    case Kind::Float:
      return as_double() != 0.0;
    case Kind::String:
      return !str().empty();
    case Kind::List:
      return !items().empty();
    case Kind::Dict:
      return !dict_data().entries.empty();
    case Kind::Object:
    case Kind::Callable:
    case Kind::Iterator:
      return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      switch (list_data().flavor) {
        case SeqFlavor::List:
          return "list";
        case SeqFlavor::Tuple:
          return "tuple";
        case SeqFlavor::DictItems:
          return "dict_items";
        case SeqFlavor::DictKeys:
          return "dict_keys";
        case SeqFlavor::DictValues:
          return "dict_values";
        case SeqFlavor::Range:
          return "range";
      }
      return "list";
    case Kind::Dict:
      return "dict";
    case Kind::Object:
      return obj().type_name;
    case Kind::Callable:
      return "function";
    case Kind::Iterator:
      return "generator";
  }
  return "object";
}

const Value* Object::find(std::string_view name) const {
  for (const auto& [k, v] : attrs) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Object::set(const std::string& name, Value value) {
  for (auto& [k, v] : attrs) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  attrs.emplace_back(name, std::move(value));
}

const Value* DictData::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : entries) {
    if (values_equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void DictData::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (values_equal(k, key)) {
      v = std::move(value);  // Python keeps the first key object and its position
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

namespace {

bool seq_equal(const ValueList& a, const ValueList& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!values_equal(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None:
      return true;
    case K::String:
      return a.str() == b.str();
    case K::List: {
      // Python never finds a list equal to a tuple, a range or a dict view.
      return a.list_data().flavor == b.list_data().flavor && seq_equal(a.items(), b.items());
    }
    case K::Dict: {
      const auto& ea = a.dict_data().entries;
      const auto& eb = b.dict_data();
      if (ea.size() != eb.entries.size()) return false;
      for (const auto& [k, v] : ea) {
        const Value* other = eb.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::List:
      return v.items();
    case Value::Kind::Dict: {
      ValueList keys;
      keys.reserve(v.dict_data().entries.size());
      for (const auto& [k, _] : v.dict_data().entries) keys.push_back(k);
      return keys;
    }
    case Value::Kind::String: {
      ValueList chars;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        size_t n = 1;
        while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
        chars.emplace_back(s.substr(i, n));
        i += n;
      }
      return chars;
    }
    case Value::Kind::Iterator: {
      IteratorState& st = v.iter_state();
      ValueList rest(st.items.begin() + static_cast<std::ptrdiff_t>(st.position), st.items.end());
      st.position = st.items.size();
      return rest;
    }
    default:
      runtime_fail("'" + v.type_name() + "' object is not iterable");
  }
}

}  // namespace nanovllm::jinja
