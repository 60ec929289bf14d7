// Expressions, with jinja2's precedence: conditional, or, and, not, comparisons, + -, ~,
// * / // %, **, unary, then postfix (attribute, subscript, call), filters and tests.
#include <fmt/format.h>

#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/parser_impl.h"
#include "jinja/tests.h"

namespace nanovllm::jinja {

ExprPtr Parser::parse_tuple(bool with_condexpr, const char* extra_end, bool explicit_parens) {
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

ExprPtr Parser::parse_condexpr() {
  Nesting nesting(*this);
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

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    auto node = make(ExprType::Or, next());
    node->a = std::move(left);
    node->b = parse_and();
    left = std::move(node);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    auto node = make(ExprType::And, next());
    node->a = std::move(left);
    node->b = parse_not();
    left = std::move(node);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  Nesting nesting(*this);
  if (is_name("not")) {
    auto node = make(ExprType::Not, next());
    node->a = parse_not();
    return node;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
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

ExprPtr Parser::binary(const Token& at, const std::string& op, ExprPtr left, ExprPtr right) {
  auto node = make(ExprType::Binary, at);
  node->name = op;
  node->a = std::move(left);
  node->b = std::move(right);
  return node;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& at = next();
    left = binary(at, at.text, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const Token& at = cur();
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  auto node = make(ExprType::Concat, at);
  node->items.push_back(std::move(first));
  while (skip_op("~")) node->items.push_back(parse_math2());
  return node;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& at = next();
    left = binary(at, at.text, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const Token& at = next();
    left = binary(at, "**", std::move(left), parse_unary(true));
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  Nesting nesting(*this);
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

ExprPtr Parser::parse_primary() {
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

void Parser::note_special_name(const std::string& name) {
  if (macros_.empty()) return;
  if (name == "varargs") macros_.back()->uses_varargs = true;
  if (name == "kwargs") macros_.back()->uses_kwargs = true;
  if (name == "caller") macros_.back()->uses_caller = true;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
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

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
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

ExprPtr Parser::parse_subscript(ExprPtr node) {
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
ExprPtr Parser::parse_subscribed() {
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

void Parser::parse_call_args(Expr& node) {
  const Token& at = cur();
  expect_op("(");
  bool require_comma = false;
  while (!is_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*")) {
      if (node.c || node.d) fail_at(at, "invalid syntax for function call expression");
      next();
      node.c = parse_expression();
    } else if (is_op("**")) {
      if (node.d) fail_at(at, "invalid syntax for function call expression");
      next();
      node.d = parse_expression();
    } else if (cur().type == TokenType::Name && look().type == TokenType::Operator &&
               look().text == "=") {
      if (node.d) fail_at(at, "invalid syntax for function call expression");
      std::string key = next().text;
      next();
      node.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (!node.kwargs.empty() || node.c || node.d) {
        fail_at(at, "invalid syntax for function call expression");
      }
      node.items.push_back(parse_expression());
    }
    require_comma = true;
  }
  expect_op(")");
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto node = make(ExprType::Call, cur());
  node->a = std::move(callee);
  parse_call_args(*node);
  return node;
}

// name(args) [| name(args) ...]; `single` stops after one filter (the caller loops).
ExprPtr Parser::parse_filter_chain(ExprPtr input, bool single) {
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

ExprPtr Parser::parse_test(ExprPtr input) {
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

}  // namespace nanovllm::jinja
