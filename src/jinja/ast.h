// Syntax tree of a parsed template: expressions and statements, each with its source position.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace nanovllm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Filters and tests are looked up once, when the template is parsed.
using FilterFn = Value (*)(Evaluator&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Evaluator&, const Value& input, CallArgs& args);

enum class ExprType {
  Literal,  // value
  Name,     // name
  List,     // items
  Tuple,    // items
  Dict,     // items: key, value, key, value, ...
  Getattr,  // a.name
  Getitem,  // a[b]
  Slice,    // a[b:c:d], each bound may be null
  // Calls, filters and tests take items (positional), kwargs, c (*args) and d (**kwargs).
  Call,      // a(items..., kwargs...)
  Filter,    // a|name(items..., kwargs...); a is null inside {% filter %} / {% set x | f %}
  Test,      // a is name(items..., kwargs...)
  Neg,       // -a
  Pos,       // +a
  Not,       // not a
  And,       // a and b
  Or,        // a or b
  Binary,    // a op b, op in + - * / // % **
  Concat,    // items joined with ~
  Compare,   // a op0 items[0] op1 items[1] ... (chained like Python)
  CondExpr,  // a if b else c (c may be null)
};

struct Expr {
  ExprType type;
  int line = 0;
  int column = 0;
  Value value;
  std::string name;  // variable, attribute, filter, test, or binary operator
  ExprPtr a, b, c, d;
  std::vector<ExprPtr> items;
  std::vector<std::string> compare_ops;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  FilterFn filter = nullptr;
  TestFn test = nullptr;

  Expr(ExprType t, int l, int col) : type(t), line(l), column(col) {}
};

// Left-hand side of set / for: a name, ns.attr, or a (nested) tuple of names.
struct AssignTarget {
  enum class Kind { Name, NamespaceAttr, Tuple } kind = Kind::Name;
  std::string name;
  std::string attr;
  std::vector<AssignTarget> items;
  int line = 0;
  int column = 0;
};

// How a scope's local name starts out when the scope is entered, as jinja2 decides when it
// compiles a template: a name assigned anywhere in a scope is local to all of that scope.
enum class LocalInit {
  Parameter,  // bound by the construct (loop target, macro argument)
  Resolve,    // read from the render context
  Alias,      // copied from the enclosing scope that has it
  Undefined,  // unset until assigned
};

// The names local to one scope (template, loop body, macro, block...).
struct ScopeInfo {
  std::vector<std::pair<std::string, LocalInit>> locals;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct MacroDef {
  std::string name;
  std::vector<MacroParam> params;
  Body body;
  // Like jinja2, a macro takes extra arguments only if its body reads varargs / kwargs.
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
  ScopeInfo scope;
};

enum class StmtType {
  Data,         // text
  Print,        // {{ expr }}
  If,           // branches
  For,          // target in expr [if test] body [else else_body]
  Set,          // set target = expr
  SetBlock,     // set target [| filters] body endset
  Macro,        // macro
  CallBlock,    // call[(params)] expr body endcall
  FilterBlock,  // filter expr body endfilter (expr is a Filter chain with a null input)
  With,         // with targets = values body endwith
  Break,
  Continue,
  Generation,  // generation body endgeneration: renders its body
};

struct IfBranch {
  ExprPtr condition;
  Body body;
};

struct Stmt {
  StmtType type;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr test;  // for-loop filter
  AssignTarget target;
  std::vector<AssignTarget> with_targets;
  std::vector<ExprPtr> with_values;
  std::vector<IfBranch> branches;
  Body body;
  Body else_body;
  std::shared_ptr<MacroDef> macro;  // Macro, and the caller signature of a CallBlock
  ScopeInfo scope;                  // body of For / SetBlock / FilterBlock / With / Generation
  ScopeInfo else_scope;             // For's else branch
  ScopeInfo test_scope;             // For's loop filter

  Stmt(StmtType t, int l, int col) : type(t), line(l), column(col) {}
};

struct ParsedTemplate {
  Body body;
  ScopeInfo scope;
};

}  // namespace nanovllm::jinja
