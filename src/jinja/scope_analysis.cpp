#include "jinja/scope_analysis.h"

#include "jinja/error.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace nanovllm::jinja {

namespace {

// jinja2's Symbols: refs declared in one scope, with how each is loaded on entry.
struct Symbols {
  const Symbols* parent = nullptr;
  std::vector<std::pair<std::string, LocalInit>> refs;
  std::set<std::string> stores;

  LocalInit* own(const std::string& name) {
    for (auto& [n, init] : refs) {
      if (n == name) return &init;
    }
    return nullptr;
  }
  bool has_own(const std::string& name) const {
    for (const auto& [n, init] : refs) {
      if (n == name) return true;
    }
    return false;
  }
  bool find_ref(const std::string& name) const {
    for (const Symbols* s = this; s; s = s->parent) {
      if (s->has_own(name)) return true;
    }
    return false;
  }
  void define(const std::string& name, LocalInit init) {
    if (LocalInit* existing = own(name)) {
      *existing = init;
    } else {
      refs.emplace_back(name, init);
    }
  }
  void store(const std::string& name) {
    stores.insert(name);
    if (has_own(name)) return;
    define(name, parent && parent->find_ref(name) ? LocalInit::Alias : LocalInit::Undefined);
  }
  void declare_parameter(const std::string& name) {
    stores.insert(name);
    define(name, LocalInit::Parameter);
  }
  void load(const std::string& name) {
    if (!find_ref(name)) define(name, LocalInit::Resolve);
  }
  // Names first assigned inside if/elif/else branches load from the enclosing scope if it has
  // them, else from the context.
  void branch_update(const std::vector<Symbols>& branches) {
    std::set<std::string> new_stores;
    for (const Symbols& b : branches) {
      for (const auto& name : b.stores) {
        if (!stores.count(name)) new_stores.insert(name);
      }
    }
    for (const Symbols& b : branches) {
      for (const auto& [name, init] : b.refs) define(name, init);
      stores.insert(b.stores.begin(), b.stores.end());
    }
    for (const auto& name : new_stores) {
      define(name, parent && parent->find_ref(name) ? LocalInit::Alias : LocalInit::Resolve);
    }
  }
  ScopeInfo info() const { return ScopeInfo{refs}; }
};

bool stores_loop(const AssignTarget& t) {
  if (t.kind == AssignTarget::Kind::Name) return t.name == "loop";
  for (const auto& item : t.items) {
    if (stores_loop(item)) return true;
  }
  return false;
}

// jinja2 refuses any assignment to `loop` anywhere inside a for statement.
void check_no_loop_store(const AssignTarget& t) {
  if (stores_loop(t)) {
    throw TemplateError("Can't assign to special loop variable in for-loop target", t.line,
                        t.column);
  }
}

void check_no_loop_store(const Body& body) {
  for (const auto& s : body) {
    if (s->type == StmtType::Set || s->type == StmtType::SetBlock || s->type == StmtType::For) {
      check_no_loop_store(s->target);
    }
    for (const auto& branch : s->branches) check_no_loop_store(branch.body);
    check_no_loop_store(s->body);
    check_no_loop_store(s->else_body);
    if (s->macro) check_no_loop_store(s->macro->body);
  }
}

class Analyzer {
 public:
  // ---- one scope's own statements (jinja2's FrameSymbolVisitor) ----
  void visit_expr(const Expr* e, Symbols& sym) {
    if (!e) return;
    if (e->type == ExprType::Name) sym.load(e->name);
    for (const ExprPtr* child : {&e->a, &e->b, &e->c, &e->d}) visit_expr(child->get(), sym);
    for (const auto& item : e->items) visit_expr(item.get(), sym);
    for (const auto& [key, value] : e->kwargs) visit_expr(value.get(), sym);
  }

  void visit_target(const AssignTarget& t, Symbols& sym, bool as_param) {
    switch (t.kind) {
      case AssignTarget::Kind::Name:
        if (as_param) {
          sym.declare_parameter(t.name);
        } else {
          sym.store(t.name);
        }
        return;
      case AssignTarget::Kind::NamespaceAttr:
        sym.load(t.name);
        return;
      case AssignTarget::Kind::Tuple:
        for (const auto& item : t.items) visit_target(item, sym, as_param);
        return;
    }
  }

  void visit_body(const Body& body, Symbols& sym) {
    for (const auto& s : body) visit_stmt(*s, sym);
  }

  // jinja2 keeps elif branches as a list of nested ifs under the first if, else on the first.
  void visit_if(const Stmt& s, size_t branch, Symbols& sym) {
    visit_expr(s.branches[branch].condition.get(), sym);
    std::vector<Symbols> branches;
    branches.push_back(sym);
    visit_body(s.branches[branch].body, branches.back());
    branches.push_back(sym);
    if (branch == 0) {
      for (size_t i = 1; i < s.branches.size(); ++i) visit_if(s, i, branches.back());
    }
    branches.push_back(sym);
    if (branch == 0) visit_body(s.else_body, branches.back());
    sym.branch_update(branches);
  }

  void visit_stmt(const Stmt& s, Symbols& sym) {
    switch (s.type) {
      case StmtType::Print:
        visit_expr(s.expr.get(), sym);
        return;
      case StmtType::If:
        visit_if(s, 0, sym);
        return;
      case StmtType::For:
        visit_expr(s.expr.get(), sym);
        return;
      case StmtType::Set:
        visit_expr(s.expr.get(), sym);
        visit_target(s.target, sym, false);
        return;
      case StmtType::SetBlock:
        visit_target(s.target, sym, false);
        return;
      case StmtType::Macro:
        sym.store(s.macro->name);
        return;
      case StmtType::CallBlock:
        visit_expr(s.expr.get(), sym);
        return;
      case StmtType::FilterBlock:
        visit_expr(s.expr.get(), sym);
        return;
      case StmtType::With:
        for (const auto& v : s.with_values) visit_expr(v.get(), sym);
        return;
      case StmtType::Data:
      case StmtType::Break:
      case StmtType::Continue:
      case StmtType::Generation:
        return;
    }
  }

  // ---- nested scopes (jinja2's RootVisitor, then recursion into each) ----
  void nested_scopes(const Body& body, const Symbols& sym) {
    for (const auto& s : body) nested_scopes(*s, sym);
  }

  void nested_scopes(Stmt& s, const Symbols& parent) {
    switch (s.type) {
      case StmtType::If:
        for (auto& branch : s.branches) nested_scopes(branch.body, parent);
        nested_scopes(s.else_body, parent);
        return;
      case StmtType::For: {
        check_no_loop_store(s.target);
        check_no_loop_store(s.body);
        check_no_loop_store(s.else_body);
        Symbols body{&parent, {}, {}};
        visit_target(s.target, body, true);
        body.declare_parameter("loop");
        visit_body(s.body, body);
        s.scope = body.info();
        nested_scopes(s.body, body);
        if (s.test) {
          Symbols test{&parent, {}, {}};
          visit_target(s.target, test, true);
          visit_expr(s.test.get(), test);
          s.test_scope = test.info();
        }
        Symbols else_sym{&parent, {}, {}};
        visit_body(s.else_body, else_sym);
        s.else_scope = else_sym.info();
        nested_scopes(s.else_body, else_sym);
        return;
      }
      case StmtType::Macro:
      case StmtType::CallBlock:
        macro_scope(*s.macro, parent);
        return;
      case StmtType::SetBlock:
      case StmtType::FilterBlock:
      case StmtType::Generation: {
        Symbols inner{&parent, {}, {}};
        visit_body(s.body, inner);
        if (s.type == StmtType::FilterBlock) visit_expr(s.expr.get(), inner);
        s.scope = inner.info();
        nested_scopes(s.body, inner);
        return;
      }
      case StmtType::With: {
        Symbols inner{&parent, {}, {}};
        for (const auto& t : s.with_targets) visit_target(t, inner, true);
        visit_body(s.body, inner);
        s.scope = inner.info();
        nested_scopes(s.body, inner);
        return;
      }
      default:
        return;
    }
  }

  void macro_scope(MacroDef& def, const Symbols& parent) {
    Symbols inner{&parent, {}, {}};
    for (const auto& p : def.params) inner.declare_parameter(p.name);
    for (const auto& p : def.params) visit_expr(p.default_value.get(), inner);
    visit_body(def.body, inner);
    if (def.uses_caller) inner.declare_parameter("caller");
    if (def.uses_kwargs) inner.declare_parameter("kwargs");
    if (def.uses_varargs) inner.declare_parameter("varargs");
    def.scope = inner.info();
    nested_scopes(def.body, inner);
  }
};

}  // namespace

void analyze_scopes(ParsedTemplate& tmpl) {
  Analyzer analyzer;
  Symbols root;
  analyzer.visit_body(tmpl.body, root);
  tmpl.scope = root.info();
  analyzer.nested_scopes(tmpl.body, root);
}

}  // namespace nanovllm::jinja
