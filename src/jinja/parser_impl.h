// The parser's class, shared by its statement and expression halves.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace nanovllm::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}
  Body parse();

 private:
  // ---- token stream ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& look() const { return toks_[std::min(pos_ + 1, toks_.size() - 1)]; }
  const Token& next();
  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool is_name(const char* name) const;
  bool skip_op(const char* op);
  bool skip_name(const char* name);
  static std::string describe(const Token& t);
  [[noreturn]] void fail_at(const Token& t, const std::string& message) const;
  [[noreturn]] void fail_here(const std::string& message) const { fail_at(cur(), message); }
  void expect_op(const char* op);
  const Token& expect_name();
  void expect(TokenType type);
  ExprPtr make(ExprType type, const Token& at);

  // ---- statements ----
  bool at_end_tag(std::initializer_list<const char*> end_tags) const;
  Body subparse(std::initializer_list<const char*> end_tags);

  // Parses a body up to one of `end_tags`; leaves the stream at the end tag's name.
  Body parse_statements(const Token& opener, std::initializer_list<const char*> end_tags,
                        bool drop_needle);
  StmtPtr parse_statement();
  StmtPtr parse_if();
  StmtPtr parse_for();
  StmtPtr parse_set();
  void parse_signature(MacroDef& def);

  // Macro bodies see their own loop nesting; break inside a macro does not leave a caller's loop.
  Body parse_macro_body(const Token& at, MacroDef& def, const char* end_tag);
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  StmtPtr parse_with();

  // Names, ns.attr (set only) and tuples of them, as jinja2's parse_assign_target.
  AssignTarget parse_assign_target(bool with_namespace, const char* extra_end);
  AssignTarget parse_target_primary(bool with_namespace);
  bool is_tuple_end(const char* extra_end) const;

  // ---- expressions ----
  ExprPtr parse_tuple(bool with_condexpr, const char* extra_end, bool explicit_parens = false);
  ExprPtr parse_expression() { return parse_condexpr(); }
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr binary(const Token& at, const std::string& op, ExprPtr left, ExprPtr right);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  void note_special_name(const std::string& name);
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);

  // One subscript: an expression or a slice start:stop:step with optional parts.
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& node);
  ExprPtr parse_call(ExprPtr callee);

  // name(args) [| name(args) ...]; `single` stops after one filter (the caller loops).
  ExprPtr parse_filter_chain(ExprPtr input, bool single = false);
  ExprPtr parse_test(ExprPtr input);
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
  int nesting_ = 0;

  // Bounds the parser's recursion so that absurdly nested input fails instead of overflowing
  // the stack (jinja2 hits Python's recursion limit far earlier).
  class Nesting {
   public:
    explicit Nesting(Parser& p);
    ~Nesting() { --p_.nesting_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Parser& p_;
  };
  std::vector<MacroDef*> macros_;
};

}  // namespace nanovllm::jinja
