#include "jinja/parser.h"

#include <fmt/format.h>

#include <initializer_list>

#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/tests.h"

namespace nanovllm::jinja {

namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse() {
    Body body = subparse({});
    if (cur().type != TokenType::Eof) fail_here(fmt::format("unexpected '{}'", cur().text));
    return body;
  }

 private:
  // ---- token stream ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& look() const { return toks_[std::min(pos_ + 1, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool is_name(const char* name) const {
    return cur().type == TokenType::Name && cur().text == name;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::Name:
      case TokenType::Operator:
      case TokenType::Integer:
      case TokenType::Float:
        return t.text;
      default:
        return token_type_name(t.type);
    }
  }

  [[noreturn]] void fail_at(const Token& t, const std::string& message) const {
    throw TemplateError(message, t.line, t.column);
  }
  [[noreturn]] void fail_here(const std::string& message) const { fail_at(cur(), message); }

  void expect_op(const char* op) {
    if (!skip_op(op)) fail_here(fmt::format("expected '{}', got '{}'", op, describe(cur())));
  }
  const Token& expect_name() {
    if (cur().type != TokenType::Name)
      fail_here(fmt::format("expected name, got '{}'", describe(cur())));
    return next();
  }
  void expect(TokenType type) {
    if (cur().type != type) {
      fail_here(fmt::format("expected {}, got '{}'", token_type_name(type), describe(cur())));
    }
    next();
  }

  ExprPtr make(ExprType type, const Token& at) {
    return std::make_unique<Expr>(type, at.line, at.column);
  }

  // ---- statements ----
  bool at_end_tag(std::initializer_list<const char*> end_tags) const {
    if (cur().type != TokenType::Name) return false;
    for (const char* tag : end_tags) {
      if (cur().text == tag) return true;
    }
    return false;
  }

  Body subparse(std::initializer_list<const char*> end_tags) {
    Body body;
    while (cur().type != TokenType::Eof) {
      const Token& t = cur();
      if (t.type == TokenType::Data) {
        auto s = std::make_unique<Stmt>(StmtType::Data, t.line, t.column);
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == TokenType::VariableBegin) {
        next();
        auto s = std::make_unique<Stmt>(StmtType::Print, cur().line, cur().column);
        s->expr = parse_tuple(true, {});
        expect(TokenType::VariableEnd);
        body.push_back(std::move(s));
      } else if (t.type == TokenType::BlockBegin) {
        next();
        if (end_tags.size() && at_end_tag(end_tags)) return body;
        body.push_back(parse_statement());
        expect(TokenType::BlockEnd);
      } else {
        fail_here(fmt::format("unexpected '{}'", describe(t)));
      }
    }
    return body;
  }

  // Parses a body up to one of `end_tags`; leaves the stream at the end tag's name.
  Body parse_statements(const Token& opener, std::initializer_list<const char*> end_tags,
                        bool drop_needle) {
    skip_op(":");
    expect(TokenType::BlockEnd);
    Body body = subparse(end_tags);
    if (cur().type == TokenType::Eof) {
      std::string wanted;
      for (const char* tag : end_tags)
        wanted += (wanted.empty() ? "'" : " or '") + std::string(tag) + "'";
      fail_at(opener, fmt::format("unexpected end of template: the '{}' block opened here is never "
                                  "closed (looking for {})",
                                  opener.text, wanted));
    }
    if (drop_needle) next();
    return body;
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    if (t.type != TokenType::Name) fail_here("tag name expected");
    const std::string& tag = t.text;
    if (tag == "if") return parse_if();
    if (tag == "for") return parse_for();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "print") {
      const Token& at = next();
      auto s = std::make_unique<Stmt>(StmtType::Print, at.line, at.column);
      auto tuple = make(ExprType::Tuple, at);
      while (cur().type != TokenType::BlockEnd) {
        if (!tuple->items.empty()) expect_op(",");
        tuple->items.push_back(parse_expression());
      }
      // {% print a, b %} prints the values one after another
      s->expr = std::move(tuple);
      s->text = "print";
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail_here(fmt::format("'{}' outside loop", tag));
      const Token& at = next();
      return std::make_unique<Stmt>(tag == "break" ? StmtType::Break : StmtType::Continue, at.line,
                                    at.column);
    }
    if (tag == "generation") {
      const Token& at = next();
      auto s = std::make_unique<Stmt>(StmtType::Generation, at.line, at.column);
      s->body = parse_statements(at, {"endgeneration"}, true);
      return s;
    }
    if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" ||
        tag == "from" || tag == "autoescape" || tag == "do" || tag == "trans") {
      fail_here(fmt::format("the '{}' tag is not supported", tag));
    }
    fail_here(fmt::format("Encountered unknown tag '{}'", tag));
  }

  StmtPtr parse_if() {
    const Token& at = next();
    auto s = std::make_unique<Stmt>(StmtType::If, at.line, at.column);
    while (true) {
      IfBranch branch;
      branch.condition = parse_tuple(false, {});
      branch.body = parse_statements(at, {"elif", "else", "endif"}, false);
      s->branches.push_back(std::move(branch));
      const Token& tok = next();
      if (tok.text == "elif") continue;
      if (tok.text == "else") s->else_body = parse_statements(at, {"endif"}, true);
      break;
    }
    return s;
  }

  StmtPtr parse_for() {
    const Token& at = next();
    auto s = std::make_unique<Stmt>(StmtType::For, at.line, at.column);
    s->target = parse_assign_target(false, "in");
    if (!skip_name("in")) fail_here(fmt::format("expected 'in', got '{}'", describe(cur())));
    s->expr = parse_tuple(false, "recursive");
    if (skip_name("if")) s->test = parse_expression();
    if (is_name("recursive")) fail_here("recursive for loops are not supported");
    ++loop_depth_;
    s->body = parse_statements(at, {"endfor", "else"}, false);
    --loop_depth_;
    if (next().text == "else") s->else_body = parse_statements(at, {"endfor"}, true);
    return s;
  }

  StmtPtr parse_set() {
    const Token& at = next();
    AssignTarget target = parse_assign_target(true, nullptr);
    if (skip_op("=")) {
      auto s = std::make_unique<Stmt>(StmtType::Set, at.line, at.column);
      s->target = std::move(target);
      s->expr = parse_tuple(true, {});
      return s;
    }
    auto s = std::make_unique<Stmt>(StmtType::SetBlock, at.line, at.column);
    if (target.kind == AssignTarget::Kind::Tuple) fail_at(at, "a block set needs a single target");
    s->target = std::move(target);
    if (is_op("|")) {
      next();
      s->expr = parse_filter_chain(nullptr);
    }
    s->body = parse_statements(at, {"endset"}, true);
    return s;
  }

  void parse_signature(MacroDef& def) {
    expect_op("(");
    while (!is_op(")")) {
      if (!def.params.empty()) expect_op(",");
      MacroParam param;
      param.name = expect_name().text;
      if (skip_op("=")) {
        param.default_value = parse_expression();
      } else if (!def.params.empty() && def.params.back().default_value) {
        fail_here("non-default argument follows default argument");
      }
      def.params.push_back(std::move(param));
    }
    expect_op(")");
  }

  // Macro bodies see their own loop nesting; break inside a macro does not leave a caller's loop.
  Body parse_macro_body(const Token& at, MacroDef& def, const char* end_tag) {
    int saved_depth = loop_depth_;
    loop_depth_ = 0;
    macros_.push_back(&def);
    Body body = parse_statements(at, {end_tag}, true);
    macros_.pop_back();
    loop_depth_ = saved_depth;
    return body;
  }

  StmtPtr parse_macro() {
    const Token& at = next();
    auto s = std::make_unique<Stmt>(StmtType::Macro, at.line, at.column);
    s->macro = std::make_shared<MacroDef>();
    s->macro->name = expect_name().text;
    parse_signature(*s->macro);
    s->macro->body = parse_macro_body(at, *s->macro, "endmacro");
    return s;
  }

  StmtPtr parse_call_block() {
    const Token& at = next();
    auto s = std::make_unique<Stmt>(StmtType::CallBlock, at.line, at.column);
    s->macro = std::make_shared<MacroDef>();
    s->macro->name = "caller";
    if (is_op("(")) parse_signature(*s->macro);
    s->expr = parse_expression();
    if (s->expr->type != ExprType::Call) fail_at(at, "expected call");
    s->macro->body = parse_macro_body(at, *s->macro, "endcall");
    return s;
  }

  StmtPtr parse_filter_block() {
    const Token& at = next();
    auto s = std::make_unique<Stmt>(StmtType::FilterBlock, at.line, at.column);
    s->expr = parse_filter_chain(nullptr);
    s->body = parse_statements(at, {"endfilter"}, true);
    return s;
  }

  StmtPtr parse_with() {
    const Token& at = next();
    auto s = std::make_unique<Stmt>(StmtType::With, at.line, at.column);
    while (cur().type != TokenType::BlockEnd) {
      if (!s->with_targets.empty()) expect_op(",");
      s->with_targets.push_back(parse_assign_target(false, nullptr));
      expect_op("=");
      s->with_values.push_back(parse_expression());
    }
    s->body = parse_statements(at, {"endwith"}, true);
    return s;
  }

  // Names, ns.attr (set only) and tuples of them, as jinja2's parse_assign_target.
  AssignTarget parse_assign_target(bool with_namespace, const char* extra_end) {
    const Token& at = cur();
    std::vector<AssignTarget> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_target_primary(with_namespace));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (items.empty())
        fail_here(fmt::format("expected an assignment target, got '{}'", describe(cur())));
      return std::move(items[0]);
    }
    AssignTarget t;
    t.kind = AssignTarget::Kind::Tuple;
    t.items = std::move(items);
    t.line = at.line;
    t.column = at.column;
    return t;
  }

  AssignTarget parse_target_primary(bool with_namespace) {
    const Token& at = cur();
    if (skip_op("(")) {
      AssignTarget t = parse_assign_target(false, nullptr);
      expect_op(")");
      return t;
    }
    if (at.type != TokenType::Name || at.text == "true" || at.text == "false" ||
        at.text == "True" || at.text == "False" || at.text == "none" || at.text == "None") {
      fail_here(fmt::format("can't assign to '{}'", describe(at)));
    }
    AssignTarget t;
    t.line = at.line;
    t.column = at.column;
    t.name = next().text;
    if (with_namespace && is_op(".")) {
      next();
      t.kind = AssignTarget::Kind::NamespaceAttr;
      t.attr = expect_name().text;
    }
    return t;
  }

  bool is_tuple_end(const char* extra_end) const {
    if (cur().type == TokenType::VariableEnd || cur().type == TokenType::BlockEnd || is_op(")"))
      return true;
    return extra_end && is_name(extra_end);
  }

  // ---- expressions ----
  ExprPtr parse_tuple(bool with_condexpr, const char* extra_end, bool explicit_parens = false) {
    const Token& at = cur();
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(with_condexpr ? parse_expression() : parse_or());
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens)
        fail_here(fmt::format("Expected an expression, got '{}'", describe(cur())));
    }
    auto node = make(ExprType::Tuple, at);
    node->items = std::move(args);
    return node;
  }

  ExprPtr parse_expression() { return parse_condexpr(); }

  ExprPtr parse_condexpr() {
    const Token& at = cur();
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      auto node = make(ExprType::CondExpr, at);
      node->b = parse_or();
      if (skip_name("else")) node->c = parse_condexpr();
      node->a = std::move(expr1);
      expr1 = std::move(node);
    }
    return expr1;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      auto node = make(ExprType::Or, next());
      node->a = std::move(left);
      node->b = parse_and();
      left = std::move(node);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      auto node = make(ExprType::And, next());
      node->a = std::move(left);
      node->b = parse_not();
      left = std::move(node);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      auto node = make(ExprType::Not, next());
      node->a = parse_not();
      return node;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token& at = cur();
    ExprPtr expr = parse_math1();
    ExprPtr node;
    while (true) {
      std::string op;
      if (cur().type == TokenType::Operator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && look().type == TokenType::Name && look().text == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!node) {
        node = make(ExprType::Compare, at);
        node->a = std::move(expr);
      }
      node->compare_ops.push_back(op);
      node->items.push_back(parse_math1());
    }
    return node ? std::move(node) : std::move(expr);
  }

  ExprPtr binary(const Token& at, const std::string& op, ExprPtr left, ExprPtr right) {
    auto node = make(ExprType::Binary, at);
    node->name = op;
    node->a = std::move(left);
    node->b = std::move(right);
    return node;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& at = next();
      left = binary(at, at.text, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    const Token& at = cur();
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto node = make(ExprType::Concat, at);
    node->items.push_back(std::move(first));
    while (skip_op("~")) node->items.push_back(parse_math2());
    return node;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = next();
      left = binary(at, at.text, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const Token& at = next();
      left = binary(at, "**", std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& at = next();
      node = make(at.text == "-" ? ExprType::Neg : ExprType::Pos, at);
      node->a = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    if (t.type == TokenType::Name) {
      next();
      auto node = make(ExprType::Literal, t);
      if (t.text == "true" || t.text == "True") {
        node->value = Value(true);
      } else if (t.text == "false" || t.text == "False") {
        node->value = Value(false);
      } else if (t.text == "none" || t.text == "None") {
        node->value = Value::none();
      } else {
        node->type = ExprType::Name;
        node->name = t.text;
        note_special_name(t.text);
      }
      return node;
    }
    if (t.type == TokenType::String) {
      auto node = make(ExprType::Literal, t);
      std::string s;
      while (cur().type == TokenType::String) s += next().text;
      node->value = Value(std::move(s));
      return node;
    }
    if (t.type == TokenType::Integer || t.type == TokenType::Float) {
      next();
      auto node = make(ExprType::Literal, t);
      node->value = t.type == TokenType::Integer ? Value(t.int_value) : Value(t.float_value);
      return node;
    }
    if (is_op("(")) {
      next();
      ExprPtr node = parse_tuple(true, nullptr, true);
      expect_op(")");
      return node;
    }
    if (is_op("[")) {
      auto node = make(ExprType::List, next());
      while (!is_op("]")) {
        if (!node->items.empty()) expect_op(",");
        if (is_op("]")) break;
        node->items.push_back(parse_expression());
      }
      expect_op("]");
      return node;
    }
    if (is_op("{")) {
      auto node = make(ExprType::Dict, next());
      while (!is_op("}")) {
        if (!node->items.empty()) expect_op(",");
        if (is_op("}")) break;
        node->items.push_back(parse_expression());
        expect_op(":");
        node->items.push_back(parse_expression());
      }
      expect_op("}");
      return node;
    }
    fail_here(fmt::format("unexpected '{}'", describe(t)));
  }

  void note_special_name(const std::string& name) {
    if (macros_.empty()) return;
    if (name == "varargs") macros_.back()->uses_varargs = true;
    if (name == "kwargs") macros_.back()->uses_kwargs = true;
    if (name == "caller") macros_.back()->uses_caller = true;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        node = parse_filter_chain(std::move(node), /*single=*/true);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& at = next();
    if (at.text == ".") {
      const Token& attr = cur();
      if (attr.type == TokenType::Name) {
        next();
        auto g = make(ExprType::Getattr, at);
        g->a = std::move(node);
        g->name = attr.text;
        return g;
      }
      if (attr.type != TokenType::Integer) fail_here("expected name or number");
      next();
      auto g = make(ExprType::Getitem, at);
      g->a = std::move(node);
      g->b = make(ExprType::Literal, attr);
      g->b->value = Value(attr.int_value);
      return g;
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.size() == 1 && args[0]->type == ExprType::Slice) {
      args[0]->a = std::move(node);
      return std::move(args[0]);
    }
    auto g = make(ExprType::Getitem, at);
    g->a = std::move(node);
    if (args.size() == 1) {
      g->b = std::move(args[0]);
    } else {
      for (const auto& arg : args) {
        if (arg->type == ExprType::Slice) fail_at(at, "multi-dimensional slices are not supported");
      }
      g->b = make(ExprType::Tuple, at);
      g->b->items = std::move(args);
    }
    return g;
  }

  // One subscript: an expression or a slice start:stop:step with optional parts.
  ExprPtr parse_subscribed() {
    const Token& at = cur();
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression();
      if (!is_op(":")) return start;
    }
    next();  // ':'
    auto slice = make(ExprType::Slice, at);
    slice->b = std::move(start);
    if (!is_op(":") && !is_op("]") && !is_op(",")) slice->c = parse_expression();
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) slice->d = parse_expression();
    }
    return slice;
  }

  void parse_call_args(Expr& node) {
    const Token& at = cur();
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) fail_here("*args and **kwargs in calls are not supported");
      if (cur().type == TokenType::Name && look().type == TokenType::Operator &&
          look().text == "=") {
        std::string key = next().text;
        next();
        node.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!node.kwargs.empty()) fail_at(at, "invalid syntax for function call expression");
        node.items.push_back(parse_expression());
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto node = make(ExprType::Call, cur());
    node->a = std::move(callee);
    parse_call_args(*node);
    return node;
  }

  // name(args) [| name(args) ...]; `single` stops after one filter (the caller loops).
  ExprPtr parse_filter_chain(ExprPtr input, bool single = false) {
    while (true) {
      const Token& name = expect_name();
      auto node = make(ExprType::Filter, name);
      node->name = name.text;
      if (is_op(".")) fail_here("dotted filter names are not supported");
      node->filter = find_filter(name.text);
      if (!node->filter) fail_at(name, fmt::format("No filter named '{}'.", name.text));
      if (is_op("(")) parse_call_args(*node);
      node->a = std::move(input);
      input = std::move(node);
      if (single || !skip_op("|")) return input;
    }
  }

  ExprPtr parse_test(ExprPtr input) {
    const Token& at = next();  // 'is'
    bool negated = skip_name("not");
    const Token& name = expect_name();
    auto node = make(ExprType::Test, at);
    node->name = name.text;
    if (is_op(".")) fail_here("dotted test names are not supported");
    node->test = find_test(name.text);
    if (!node->test) fail_at(name, fmt::format("No test named '{}'.", name.text));
    node->a = std::move(input);
    if (is_op("(")) {
      parse_call_args(*node);
    } else if ((cur().type == TokenType::Name || cur().type == TokenType::String ||
                cur().type == TokenType::Integer || cur().type == TokenType::Float || is_op("(") ||
                is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail_here("You cannot chain multiple tests with is");
      node->items.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return node;
    auto not_node = make(ExprType::Not, at);
    not_node->a = std::move(node);
    return not_node;
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
  std::vector<MacroDef*> macros_;
};

}  // namespace

Body parse_template(std::string_view source, const LexerOptions& options) {
  return Parser(tokenize(source, options)).parse();
}

}  // namespace nanovllm::jinja
