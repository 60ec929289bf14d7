#include "jinja/evaluator.h"

#include <algorithm>
#include <optional>

#include "jinja/attributes.h"
#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/globals.h"
#include "jinja/operators.h"
#include "jinja/tests.h"
#include "jinja/value_format.h"

namespace nanovllm::jinja {

const Value* Frame::find_local(std::string_view name) const {
  for (const auto& [k, v] : vars) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Frame::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(name, std::move(value));
}

namespace {

// Switches the evaluator's current frame for the lifetime of a scope.
class FrameScope {
 public:
  FrameScope(std::shared_ptr<Frame>& slot, std::shared_ptr<Frame> frame)
      : slot_(slot), saved_(std::move(slot)) {
    slot_ = std::move(frame);
  }
  ~FrameScope() { slot_ = std::move(saved_); }
  FrameScope(const FrameScope&) = delete;
  FrameScope& operator=(const FrameScope&) = delete;

 private:
  std::shared_ptr<Frame>& slot_;
  std::shared_ptr<Frame> saved_;
};

[[noreturn]] void rethrow_at(const RuntimeFailure& f, int line, int column) {
  throw TemplateError(f.what(), line, column, f.raised_by_template());
}

Value make_loop_object(const ValueList& items, size_t i, Value cycle) {
  auto loop = std::make_shared<Object>();
  loop->type_name = "LoopContext";
  size_t n = items.size();
  auto idx = [](size_t v) { return Value(static_cast<int64_t>(v)); };
  loop->attrs = {
      {"index", idx(i + 1)},
      {"index0", idx(i)},
      {"revindex", idx(n - i)},
      {"revindex0", idx(n - i - 1)},
      {"first", Value(i == 0)},
      {"last", Value(i + 1 == n)},
      {"length", idx(n)},
      {"depth", idx(1)},
      {"depth0", idx(0)},
      {"previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item")},
      {"nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item")},
      {"cycle", std::move(cycle)},
  };
  return Value::object(std::move(loop));
}

}  // namespace

Evaluator::Evaluator(Value context)
    : context_(std::move(context)), frame_(std::make_shared<Frame>(nullptr)) {}

Evaluator::~Evaluator() {
  for (const Value& ns : assigned_namespaces_) ns.obj().attrs.clear();
  for (const std::weak_ptr<Frame>& weak : macro_frames_) {
    if (const std::shared_ptr<Frame> frame = weak.lock()) frame->vars.clear();
  }
}

std::string Evaluator::render(const ParsedTemplate& tmpl) {
  frame_ = enter_scope(tmpl.scope, nullptr);
  std::string out;
  exec_body(tmpl.body, out);
  return out;
}

std::shared_ptr<Frame> Evaluator::enter_scope(const ScopeInfo& scope,
                                              std::shared_ptr<Frame> parent) const {
  auto frame = std::make_shared<Frame>(parent);
  frame->vars.reserve(scope.locals.size());
  for (const auto& [name, init] : scope.locals) {
    switch (init) {
      case LocalInit::Resolve:
        frame->vars.emplace_back(name, resolve_context(name));
        break;
      case LocalInit::Alias:
        frame->vars.emplace_back(name, lookup_from(parent.get(), name, *this));
        break;
      case LocalInit::Parameter:
      case LocalInit::Undefined:
        frame->vars.emplace_back(name, Value::undefined("'" + name + "' is undefined"));
        break;
    }
  }
  return frame;
}

Evaluator::Flow Evaluator::exec_body(const Body& body, std::string& out) {
  for (const auto& s : body) {
    Flow flow = exec(*s, out);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

std::string Evaluator::render_in_scope(const Body& body, const ScopeInfo& info) {
  FrameScope scope(frame_, enter_scope(info, frame_));
  std::string out;
  exec_body(body, out);
  return out;
}

Evaluator::Flow Evaluator::exec(const Stmt& s, std::string& out) {
  try {
    switch (s.type) {
      case StmtType::Data:
        out += s.text;
        return Flow::Normal;
      case StmtType::Print:
        if (s.text == "print") {
          for (const auto& item : s.expr->items) out += python_str(eval(*item));
        } else {
          out += python_str(eval(*s.expr));
        }
        return Flow::Normal;
      case StmtType::If:
        for (const auto& branch : s.branches) {
          if (eval(*branch.condition).truthy()) return exec_body(branch.body, out);
        }
        return exec_body(s.else_body, out);
      case StmtType::For:
        return exec_for(s, out);
      case StmtType::Set:
        assign(s.target, eval(*s.expr), *frame_);
        return Flow::Normal;
      case StmtType::SetBlock: {
        Value body(render_in_scope(s.body, s.scope));
        assign(s.target, s.expr ? eval_filter(*s.expr, &body) : body, *frame_);
        return Flow::Normal;
      }
      case StmtType::Macro:
        frame_->set(s.macro->name, make_macro(s.macro, frame_));
        macro_frames_.push_back(frame_);
        return Flow::Normal;
      case StmtType::CallBlock:
        exec_call_block(s, out);
        return Flow::Normal;
      case StmtType::FilterBlock: {
        Value body(render_in_scope(s.body, s.scope));
        out += python_str(eval_filter(*s.expr, &body));
        return Flow::Normal;
      }
      case StmtType::With: {
        auto frame = enter_scope(s.scope, frame_);
        for (size_t i = 0; i < s.with_targets.size(); ++i) {
          assign(s.with_targets[i], eval(*s.with_values[i]), *frame);
        }
        FrameScope scope(frame_, frame);
        return exec_body(s.body, out);
      }
      case StmtType::Break:
        return Flow::Break;
      case StmtType::Continue:
        return Flow::Continue;
      case StmtType::Generation:
        out += render_in_scope(s.body, s.scope);
        return Flow::Normal;
    }
  } catch (const RuntimeFailure& f) {
    rethrow_at(f, s.line, s.column);
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec_for(const Stmt& s, std::string& out) {
  ValueList items = iterate(eval(*s.expr));  // an Undefined iterates as empty
  if (s.test) {
    ValueList kept;
    for (const Value& item : items) {
      auto frame = enter_scope(s.test_scope, frame_);
      assign(s.target, item, *frame);
      FrameScope scope(frame_, frame);
      if (eval(*s.test).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    FrameScope scope(frame_, enter_scope(s.else_scope, frame_));
    return exec_body(s.else_body, out);  // a break there belongs to an outer loop
  }
  for (size_t i = 0; i < items.size(); ++i) {
    auto frame = enter_scope(s.scope, frame_);
    assign(s.target, items[i], *frame);
    Value cycle = Value::callable("loop.cycle", [i](Evaluator&, CallArgs& args) -> Value {
      if (args.positional.empty()) runtime_fail("no items for cycling given");
      return args.positional[i % args.positional.size()];
    });
    frame->set("loop", make_loop_object(items, i, std::move(cycle)));
    FrameScope scope(frame_, frame);
    if (exec_body(s.body, out) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Evaluator::exec_call_block(const Stmt& s, std::string& out) {
  const Expr& call = *s.expr;
  Value callee = eval(*call.a);
  CallArgs args = eval_args(call);
  args.keyword.emplace_back("caller", make_macro(s.macro, frame_));
  try {
    out += python_str(this->call(callee, args));
  } catch (const RuntimeFailure& f) {
    rethrow_at(f, call.line, call.column);
  }
}

void Evaluator::assign(const AssignTarget& target, const Value& value, Frame& frame) {
  switch (target.kind) {
    case AssignTarget::Kind::Name:
      frame.set(target.name, value);
      return;
    case AssignTarget::Kind::NamespaceAttr: {
      Value ns = lookup(target.name);
      if (!ns.is_object() || !ns.obj().is_namespace) {
        throw TemplateError("cannot assign attribute on non-namespace object", target.line,
                            target.column);
      }
      ns.obj().set(target.attr, value);
      if (assigned_namespace_ids_.insert(ns.identity()).second) assigned_namespaces_.push_back(ns);
      return;
    }
    case AssignTarget::Kind::Tuple: {
      ValueList items = iterate(value);
      size_t want = target.items.size();
      if (items.size() < want) {
        runtime_fail("not enough values to unpack (expected " + std::to_string(want) + ", got " +
                     std::to_string(items.size()) + ")");
      }
      if (items.size() > want) {
        runtime_fail("too many values to unpack (expected " + std::to_string(want) + ")");
      }
      for (size_t i = 0; i < want; ++i) assign(target.items[i], items[i], frame);
      return;
    }
  }
}

Value Evaluator::lookup(const std::string& name) const {
  return lookup_from(frame_.get(), name, *this);
}

Value Evaluator::lookup_from(const Frame* frame, const std::string& name, const Evaluator& ev) {
  for (const Frame* f = frame; f; f = f->parent.get()) {
    if (const Value* v = f->find_local(name)) return *v;
  }
  return ev.resolve_context(name);
}

Value Evaluator::resolve_context(const std::string& name) const {
  if (context_.is_dict()) {
    if (const Value* v = context_.dict_data().find(std::string_view(name))) return *v;
  }
  if (auto v = builtin_global(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

Value Evaluator::make_macro(std::shared_ptr<const MacroDef> def, std::shared_ptr<Frame> closure) {
  std::string name = def->name;
  return Value::callable(
      name, [def = std::move(def), closure = std::move(closure)](Evaluator& ev, CallArgs& args) {
        return ev.invoke_macro(*def, closure, args);
      });
}

// jinja2's Macro.__call__: positional arguments first; keywords only fill the parameters
// positional ones left open; the rest go to `kwargs` when the macro reads it.
std::vector<bool> Evaluator::bind_macro_arguments(const MacroDef& def, const CallArgs& args,
                                                  Frame& frame) {
  const size_t n = def.params.size();
  std::vector<bool> bound(n, false);
  const size_t given = std::min(args.positional.size(), n);
  for (size_t i = 0; i < given; ++i) {
    frame.set(def.params[i].name, args.positional[i]);
    bound[i] = true;
  }
  std::vector<std::pair<std::string, Value>> keywords = args.keyword;
  auto take_keyword = [&](const std::string& name) -> std::optional<Value> {
    for (auto it = keywords.begin(); it != keywords.end(); ++it) {
      if (it->first == name) {
        Value v = std::move(it->second);
        keywords.erase(it);
        return v;
      }
    }
    return std::nullopt;
  };
  bool found_caller = false;
  for (size_t i = given; i < n; ++i) {
    if (auto v = take_keyword(def.params[i].name)) {
      frame.set(def.params[i].name, *v);
      bound[i] = true;
    }
    if (def.params[i].name == "caller") found_caller = true;
  }
  if (given == n) {
    for (const MacroParam& p : def.params) found_caller = found_caller || p.name == "caller";
  }
  if (def.uses_caller && !found_caller) {
    auto caller = take_keyword("caller");
    frame.set("caller", caller ? *caller : Value::undefined("No caller defined"));
  }
  if (def.uses_kwargs) {
    DictData extra;
    for (auto& [k, v] : keywords) extra.set(Value(k), std::move(v));
    frame.set("kwargs", Value::dict(std::move(extra)));
  } else if (!keywords.empty()) {
    if (take_keyword("caller")) {
      runtime_fail("macro '" + def.name +
                   "' was invoked with two values for the special caller argument");
    }
    runtime_fail("macro '" + def.name + "' takes no keyword argument '" + keywords[0].first + "'");
  }
  if (def.uses_varargs) {
    ValueList rest(args.positional.begin() + static_cast<std::ptrdiff_t>(given),
                   args.positional.end());
    frame.set("varargs", Value::tuple(std::move(rest)));
  } else if (args.positional.size() > n) {
    runtime_fail("macro '" + def.name + "' takes not more than " + std::to_string(n) +
                 " argument(s)");
  }
  return bound;
}

Value Evaluator::invoke_macro(const MacroDef& def, const std::shared_ptr<Frame>& closure,
                              CallArgs& args) {
  // Recursive macros are fine; runaway recursion fails instead of overflowing the stack.
  constexpr int kMaxMacroDepth = 100;
  if (macro_depth_ >= kMaxMacroDepth) {
    runtime_fail("maximum macro recursion depth exceeded in '" + def.name + "'");
  }
  ++macro_depth_;
  struct DepthRestore {
    int& depth;
    ~DepthRestore() { --depth; }
  } restore{macro_depth_};
  auto frame = enter_scope(def.scope, closure);
  std::vector<bool> bound = bind_macro_arguments(def, args, *frame);
  FrameScope scope(frame_, frame);
  // Defaults are evaluated inside the macro, so they may use the arguments before them.
  for (size_t i = 0; i < def.params.size(); ++i) {
    if (bound[i]) continue;
    const MacroParam& p = def.params[i];
    frame->set(p.name, p.default_value
                           ? eval(*p.default_value)
                           : Value::undefined("parameter '" + p.name + "' was not provided"));
  }
  std::string out;
  exec_body(def.body, out);
  return Value(std::move(out));
}

Value Evaluator::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_callable()) runtime_fail("'" + callee.type_name() + "' object is not callable");
  return callee.fn().fn(*this, args);
}

Value Evaluator::apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  FilterFn fn = find_filter(name);
  if (!fn) runtime_fail("No filter named '" + name + "'.");
  return fn(*this, input, args);
}

bool Evaluator::apply_test(const std::string& name, const Value& input, CallArgs& args) {
  TestFn fn = find_test(name);
  if (!fn) runtime_fail("No test named '" + name + "'.");
  return fn(*this, input, args);
}

CallArgs Evaluator::eval_args(const Expr& e) {
  CallArgs args;
  args.positional.reserve(e.items.size());
  for (const auto& item : e.items) args.positional.push_back(eval(*item));
  if (e.c) {
    for (Value& v : iterate(eval(*e.c))) args.positional.push_back(std::move(v));
  }
  auto add_keyword = [&](const std::string& key, Value value) {
    for (const auto& [seen, _] : args.keyword) {
      if (seen == key) runtime_fail("got multiple values for keyword argument '" + key + "'");
    }
    args.keyword.emplace_back(key, std::move(value));
  };
  for (const auto& [key, value] : e.kwargs) add_keyword(key, eval(*value));
  if (e.d) {
    Value mapping = eval(*e.d);
    if (!mapping.is_dict()) {
      runtime_fail("argument after ** must be a mapping, not " + mapping.type_name());
    }
    for (const auto& [k, v] : mapping.dict_data().entries) {
      if (!k.is_string()) runtime_fail("keywords must be strings");
      add_keyword(k.str(), v);
    }
  }
  return args;
}

Value Evaluator::eval_filter(const Expr& e, const Value* block_input) {
  // In {% filter f|g %} and {% set x | f %} the chain bottoms out in the rendered block.
  Value input = !e.a ? *block_input : block_input ? eval_filter(*e.a, block_input) : eval(*e.a);
  CallArgs args = eval_args(e);
  try {
    return e.filter(*this, input, args);
  } catch (const RuntimeFailure& f) {
    rethrow_at(f, e.line, e.column);
  }
}

Value Evaluator::eval_compare(const Expr& e) {
  Value left = eval(*e.a);
  for (size_t i = 0; i < e.items.size(); ++i) {
    Value right = eval(*e.items[i]);
    if (!compare_op(e.compare_ops[i], left, right)) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Evaluator::eval(const Expr& e) {
  try {
    return eval_inner(e);
  } catch (const RuntimeFailure& f) {
    rethrow_at(f, e.line, e.column);
  }
}

Value Evaluator::eval_inner(const Expr& e) {
  switch (e.type) {
    case ExprType::Literal:
      return e.value;
    case ExprType::Name:
      return lookup(e.name);
    case ExprType::List:
    case ExprType::Tuple: {
      ValueList items;
      items.reserve(e.items.size());
      for (const auto& item : e.items) items.push_back(eval(*item));
      return Value::list(std::move(items),
                         e.type == ExprType::Tuple ? SeqFlavor::Tuple : SeqFlavor::List);
    }
    case ExprType::Dict: {
      DictData d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value key = eval(*e.items[i]);
        if (key.is_list() && !key.is_tuple()) runtime_fail("unhashable type: 'list'");
        if (key.is_dict()) runtime_fail("unhashable type: 'dict'");
        d.set(std::move(key), eval(*e.items[i + 1]));
      }
      return Value::dict(std::move(d));
    }
    case ExprType::Getattr:
      return get_attr(eval(*e.a), e.name);
    case ExprType::Getitem:
      return get_item(eval(*e.a), eval(*e.b));
    case ExprType::Slice:
      return get_slice(eval(*e.a), e.b ? eval(*e.b) : Value::none(),
                       e.c ? eval(*e.c) : Value::none(), e.d ? eval(*e.d) : Value::none());
    case ExprType::Call: {
      Value callee = eval(*e.a);
      CallArgs args = eval_args(e);
      return call(callee, args);
    }
    case ExprType::Filter:
      return eval_filter(e, nullptr);
    case ExprType::Test: {
      Value input = eval(*e.a);
      CallArgs args = eval_args(e);
      return Value(e.test(*this, input, args));
    }
    case ExprType::Neg:
      return negate(eval(*e.a));
    case ExprType::Pos:
      return unary_plus(eval(*e.a));
    case ExprType::Not:
      return Value(!eval(*e.a).truthy());
    case ExprType::And: {
      Value left = eval(*e.a);
      return left.truthy() ? eval(*e.b) : left;
    }
    case ExprType::Or: {
      Value left = eval(*e.a);
      return left.truthy() ? left : eval(*e.b);
    }
    case ExprType::Binary:
      return binary_op(e.name, eval(*e.a), eval(*e.b));
    case ExprType::Concat: {
      std::string out;
      for (const auto& item : e.items) out += python_str(eval(*item));
      return Value(std::move(out));
    }
    case ExprType::Compare:
      return eval_compare(e);
    case ExprType::CondExpr:
      if (eval(*e.b).truthy()) return eval(*e.a);
      if (e.c) return eval(*e.c);
      return Value::undefined(
          "the inline if-expression evaluated to false and no else section was defined");
  }
  runtime_fail("unknown expression");
}

}  // namespace nanovllm::jinja
