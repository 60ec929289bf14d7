#include <set>
#include <string>

#include "jinja/args.h"
#include "jinja/error.h"
#include "jinja/methods.h"

namespace nanovllm::jinja {

namespace {

// jinja2's ImmutableSandboxedEnvironment refuses methods that modify a container.
Value unsafe(const std::string& type, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
}

Value unsupported(const std::string& type, const std::string& name) {
  return Value::callable(type + "." + name, [type, name](Evaluator&, CallArgs&) -> Value {
    runtime_fail(type + "." + name + "() is not supported by this template engine");
  });
}

Value dict_view(const Value& self, SeqFlavor flavor) {
  ValueList out;
  for (const auto& [k, v] : self.dict_data().entries) {
    if (flavor == SeqFlavor::DictItems) {
      out.push_back(Value::tuple({k, v}));
    } else {
      out.push_back(flavor == SeqFlavor::DictKeys ? k : v);
    }
  }
  return Value::list(std::move(out), flavor);
}

}  // namespace

std::optional<Value> dict_method(const Value& self, const std::string& name) {
  static const std::set<std::string> mutating = {"clear", "pop", "popitem", "setdefault", "update"};
  if (mutating.count(name)) return unsafe("dict", name);
  if (name == "items" || name == "keys" || name == "values") {
    SeqFlavor flavor = name == "items"  ? SeqFlavor::DictItems
                       : name == "keys" ? SeqFlavor::DictKeys
                                        : SeqFlavor::DictValues;
    return Value::callable("dict." + name, [self, flavor, name](Evaluator&, CallArgs& args) {
      BoundArgs(name, args, {});
      return dict_view(self, flavor);
    });
  }
  if (name == "get") {
    return Value::callable("dict.get", [self](Evaluator&, CallArgs& args) {
      BoundArgs a("get", args, {"key", "default"}, 1);
      const Value* found = self.dict_data().find(a.get(0));
      return found ? *found : a.get_or(1, Value::none());
    });
  }
  if (name == "copy") {
    return Value::callable("dict.copy", [self](Evaluator&, CallArgs& args) {
      BoundArgs("copy", args, {});
      return self;
    });
  }
  if (name == "fromkeys") return unsupported("dict", name);
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, const std::string& name) {
  static const std::set<std::string> mutating = {"append", "clear",  "extend",  "insert",
                                                 "pop",    "remove", "reverse", "sort"};
  const std::string type = self.type_name();
  bool is_list = self.list_data().flavor == SeqFlavor::List;
  if (is_list && mutating.count(name)) return unsafe(type, name);
  if (name == "count") {
    return Value::callable(type + ".count", [self](Evaluator&, CallArgs& args) {
      BoundArgs a("count", args, {"value"}, 1);
      int64_t n = 0;
      for (const Value& v : self.items()) n += values_equal(v, a.get(0));
      return Value(n);
    });
  }
  if (name == "index") {
    return Value::callable(type + ".index", [self](Evaluator&, CallArgs& args) -> Value {
      BoundArgs a("index", args, {"value"}, 1);
      for (size_t i = 0; i < self.items().size(); ++i) {
        if (values_equal(self.items()[i], a.get(0))) return Value(static_cast<int64_t>(i));
      }
      runtime_fail("value is not in list");
    });
  }
  if (is_list && name == "copy") {
    return Value::callable("list.copy", [self](Evaluator&, CallArgs& args) {
      BoundArgs("copy", args, {});
      return self;
    });
  }
  return std::nullopt;
}

}  // namespace nanovllm::jinja
