// Renders a parsed template: statements write text, expressions evaluate to Values, with jinja2's
// scoping (each loop iteration, macro call and block has its own frame; `set` writes the
// innermost one).
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace nanovllm::jinja {

struct Frame {
  std::shared_ptr<Frame> parent;
  std::vector<std::pair<std::string, Value>> vars;

  explicit Frame(std::shared_ptr<Frame> p) : parent(std::move(p)) {}
  const Value* find_local(std::string_view name) const;
  void set(const std::string& name, Value value);
};

class Evaluator {
 public:
  // `context` is a dict of the variables the template sees.
  explicit Evaluator(Value context);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Throws TemplateError (with the position of the failing expression or statement).
  std::string render(const ParsedTemplate& tmpl);

  // For filters, tests and functions that call back into the engine.
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args);

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  Flow exec_for(const Stmt& s, std::string& out);
  void exec_call_block(const Stmt& s, std::string& out);
  std::string render_in_scope(const Body& body, const ScopeInfo& scope);
  // A frame for `scope` inside `parent`, its locals initialized as jinja2 does on entry.
  std::shared_ptr<Frame> enter_scope(const ScopeInfo& scope, std::shared_ptr<Frame> parent) const;
  Value resolve_context(const std::string& name) const;

  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  Value eval_filter(const Expr& e, const Value* block_input);
  Value eval_compare(const Expr& e);
  CallArgs eval_args(const Expr& e);

  // The innermost frame declaring `name` decides its value; undeclared names come from the
  // render context.
  Value lookup(const std::string& name) const;
  static Value lookup_from(const Frame* frame, const std::string& name, const Evaluator& ev);
  void assign(const AssignTarget& target, const Value& value, Frame& frame);
  Value make_macro(std::shared_ptr<const MacroDef> def, std::shared_ptr<Frame> closure);
  Value invoke_macro(const MacroDef& def, const std::shared_ptr<Frame>& closure, CallArgs& args);
  // Binds arguments into the macro's frame; returns which parameters were given.
  static std::vector<bool> bind_macro_arguments(const MacroDef& def, const CallArgs& args,
                                                Frame& frame);

  Value context_;
  std::shared_ptr<Frame> frame_;
  int macro_depth_ = 0;
  // Reference cycles the render may have made, cut when it ends: a macro refers to the frame
  // it is defined in, which holds it, and a namespace may be given attributes that lead back to
  // it. Nothing else can close a cycle (values are immutable; `set` writes only the frame
  // running it).
  std::vector<std::weak_ptr<Frame>> macro_frames_;
  std::vector<Value> assigned_namespaces_;
  std::unordered_set<const void*> assigned_namespace_ids_;
};

}  // namespace nanovllm::jinja
