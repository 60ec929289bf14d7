#include "jinja/parser.h"

#include <fmt/format.h>

#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/parser_impl.h"
#include "jinja/scope_analysis.h"
#include "jinja/tests.h"

namespace nanovllm::jinja {

Body Parser::parse() {
  Body body = subparse({});
  if (cur().type != TokenType::Eof) fail_here(fmt::format("unexpected '{}'", cur().text));
  return body;
}

const Token& Parser::next() {
  const Token& t = toks_[pos_];
  if (pos_ + 1 < toks_.size()) ++pos_;
  return t;
}

bool Parser::is_name(const char* name) const {
  return cur().type == TokenType::Name && cur().text == name;
}

bool Parser::skip_op(const char* op) {
  if (!is_op(op)) return false;
  next();
  return true;
}

bool Parser::skip_name(const char* name) {
  if (!is_name(name)) return false;
  next();
  return true;
}

std::string Parser::describe(const Token& t) {
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

void Parser::fail_at(const Token& t, const std::string& message) const {
  throw TemplateError(message, t.line, t.column);
}

void Parser::expect_op(const char* op) {
  if (!skip_op(op)) fail_here(fmt::format("expected '{}', got '{}'", op, describe(cur())));
}

const Token& Parser::expect_name() {
  if (cur().type != TokenType::Name)
    fail_here(fmt::format("expected name, got '{}'", describe(cur())));
  return next();
}

void Parser::expect(TokenType type) {
  if (cur().type != type) {
    fail_here(fmt::format("expected {}, got '{}'", token_type_name(type), describe(cur())));
  }
  next();
}

ExprPtr Parser::make(ExprType type, const Token& at) {
  return std::make_unique<Expr>(type, at.line, at.column);
}

// ---- statements ----
bool Parser::at_end_tag(std::initializer_list<const char*> end_tags) const {
  if (cur().type != TokenType::Name) return false;
  for (const char* tag : end_tags) {
    if (cur().text == tag) return true;
  }
  return false;
}

Body Parser::subparse(std::initializer_list<const char*> end_tags) {
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
Body Parser::parse_statements(const Token& opener, std::initializer_list<const char*> end_tags,
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

Parser::Nesting::Nesting(Parser& p) : p_(p) {
  constexpr int kMaxNesting = 200;
  if (++p_.nesting_ > kMaxNesting) p_.fail_here("the template nests too deeply");
}

StmtPtr Parser::parse_statement() {
  Nesting nesting(*this);
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
  if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
      tag == "autoescape" || tag == "do" || tag == "trans") {
    fail_here(fmt::format("the '{}' tag is not supported", tag));
  }
  fail_here(fmt::format("Encountered unknown tag '{}'", tag));
}

StmtPtr Parser::parse_if() {
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

StmtPtr Parser::parse_for() {
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

StmtPtr Parser::parse_set() {
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

void Parser::parse_signature(MacroDef& def) {
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
Body Parser::parse_macro_body(const Token& at, MacroDef& def, const char* end_tag) {
  int saved_depth = loop_depth_;
  loop_depth_ = 0;
  macros_.push_back(&def);
  Body body = parse_statements(at, {end_tag}, true);
  macros_.pop_back();
  loop_depth_ = saved_depth;
  return body;
}

StmtPtr Parser::parse_macro() {
  const Token& at = next();
  auto s = std::make_unique<Stmt>(StmtType::Macro, at.line, at.column);
  s->macro = std::make_shared<MacroDef>();
  s->macro->name = expect_name().text;
  parse_signature(*s->macro);
  s->macro->body = parse_macro_body(at, *s->macro, "endmacro");
  for (const MacroParam& p : s->macro->params) {
    if (p.name == "caller" && s->macro->uses_caller && !p.default_value) {
      fail_at(at,
              "When defining macros or call blocks the special \"caller\" argument must be "
              "omitted or be given a default.");
    }
  }
  return s;
}

StmtPtr Parser::parse_call_block() {
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

StmtPtr Parser::parse_filter_block() {
  const Token& at = next();
  auto s = std::make_unique<Stmt>(StmtType::FilterBlock, at.line, at.column);
  s->expr = parse_filter_chain(nullptr);
  s->body = parse_statements(at, {"endfilter"}, true);
  return s;
}

StmtPtr Parser::parse_with() {
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
AssignTarget Parser::parse_assign_target(bool with_namespace, const char* extra_end) {
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

AssignTarget Parser::parse_target_primary(bool with_namespace) {
  const Token& at = cur();
  if (skip_op("(")) {
    AssignTarget t = parse_assign_target(false, nullptr);
    expect_op(")");
    return t;
  }
  if (at.type != TokenType::Name || at.text == "true" || at.text == "false" || at.text == "True" ||
      at.text == "False" || at.text == "none" || at.text == "None") {
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

bool Parser::is_tuple_end(const char* extra_end) const {
  if (cur().type == TokenType::VariableEnd || cur().type == TokenType::BlockEnd || is_op(")"))
    return true;
  return extra_end && is_name(extra_end);
}

ParsedTemplate parse_template(std::string_view source, const LexerOptions& options) {
  ParsedTemplate tmpl;
  tmpl.body = Parser(tokenize(source, options)).parse();
  analyze_scopes(tmpl);
  return tmpl;
}

}  // namespace nanovllm::jinja
