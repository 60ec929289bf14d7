// Everything the engine cannot or must not render fails with a TemplateError naming the
// problem and where it is.
#include "render_helpers.h"

namespace nanovllm::jinja::testing {
namespace {

TemplateError parse_error(const std::string& source) {
  try {
    Template t(source);
    ADD_FAILURE() << "expected a syntax error for: " << source;
  } catch (const TemplateError& e) {
    return e;
  }
  return TemplateError("no error", 0, 0);
}

TEST(JinjaErrors, SyntaxErrorsCarryPositions) {
  TemplateError e = parse_error("line one\n  {% foo %}");
  EXPECT_EQ(e.message(), "Encountered unknown tag 'foo'");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 6);
  EXPECT_NE(std::string(e.what()).find("line 2, column 6"), std::string::npos);

  e = parse_error("a\n{% for x in y %}\nbody");
  EXPECT_EQ(e.line(), 2);
  EXPECT_NE(e.message().find("'for' block opened here is never closed"), std::string::npos);

  e = parse_error("{% if x %}a{% endfor %}");
  EXPECT_EQ(e.message(), "Encountered unknown tag 'endfor'");

  e = parse_error("{{ x|nosuchfilter }}");
  EXPECT_EQ(e.message(), "No filter named 'nosuchfilter'.");
  EXPECT_EQ(e.column(), 6);

  EXPECT_EQ(parse_error("{{ x is nosuchtest }}").message(), "No test named 'nosuchtest'.");
  EXPECT_EQ(parse_error("{{ 1 + }}").message(), "unexpected 'end of print statement'");
  EXPECT_EQ(parse_error("{{ 'abc' }").message(), "unexpected '}'");
  EXPECT_EQ(parse_error("{{ 'abc").message(), "unexpected end of string");
  EXPECT_EQ(parse_error("{# never closed").message(), "Missing end of comment tag");
  EXPECT_EQ(parse_error("{% break %}").message(), "'break' outside loop");
  EXPECT_EQ(parse_error("{% macro m(caller) %}{{ caller() }}{% endmacro %}")
                .message()
                .rfind("When defining macros or call blocks the special \"caller\"", 0),
            0u);
  EXPECT_EQ(parse_error("{% include 'x' %}").message(), "the 'include' tag is not supported");
  EXPECT_EQ(parse_error("{% for x in y recursive %}{% endfor %}").message(),
            "recursive for loops are not supported");
  EXPECT_EQ(parse_error("{% set 1 = 2 %}").message(), "can't assign to '1'");
  EXPECT_EQ(parse_error("{{ f(**a, *b) }}").message(),
            "invalid syntax for function call expression");
  EXPECT_EQ(parse_error("{{ (1 }}").message(), "unexpected '}', expected ')'");
}

TEST(JinjaErrors, RunawayNestingFailsInsteadOfOverflowingTheStack) {
  EXPECT_EQ(
      parse_error("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").message(),
      "the template nests too deeply");
  EXPECT_EQ(parse_error("{{ " + std::string(5000, '-') + "1 }}").message(),
            "the template nests too deeply");
  EXPECT_EQ(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").message(),
            "maximum macro recursion depth exceeded in 'f'");
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{{ n % 10 }}"
                   "{% endmacro %}{{ f(20) }}"),
            "012345678901234567890");
  EXPECT_EQ(render_error("{% set ns = namespace(x=[]) %}{% for i in range(2000) %}"
                         "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}")
                .message(),
            "maximum nesting depth exceeded while writing JSON");
}

// What a template can ask for is bounded (jinja2 would run out of memory or time instead):
// each fails cleanly and quickly.
TEST(JinjaErrors, RunawayWorkAndSizesFailCleanly) {
  const auto message_of = [](const std::string& source) { return render_error(source).message(); };
  const std::string too_large = "more than the 67108864 a template may build";
  EXPECT_NE(message_of("{{ 'ab' * 10**12 }}").find(too_large), std::string::npos);
  EXPECT_NE(message_of("{{ [1, 2] * 10**9 }}").find(too_large), std::string::npos);
  EXPECT_NE(message_of("{{ 'x'|center(10**12) }}").find(too_large), std::string::npos);
  EXPECT_NE(message_of("{{ 'x'.ljust(10**12, '*') }}").find(too_large), std::string::npos);
  EXPECT_NE(message_of("{{ 'a\nb'|indent(10**12) }}").find(too_large), std::string::npos);
  EXPECT_NE(message_of("{{ [1]|tojson(indent=10**12) }}").find(too_large), std::string::npos);
  EXPECT_NE(message_of("{{ '%99999999999999999999d' % 1 }}").find(too_large), std::string::npos);
  // Doubling a string in a loop, or writing text in nested loops, runs out of budget.
  EXPECT_EQ(message_of("{% set ns = namespace(s='xy') %}{% for i in range(64) %}"
                       "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
            "the template produced more than 268435456 bytes of strings and list items");
  EXPECT_EQ(message_of("{% for i in range(100000) %}{% for j in range(100000) %}"
                       "{% endfor %}{% endfor %}"),
            "the template ran more than 250000 loop iterations and macro calls");
  EXPECT_EQ(message_of("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
                       "{% endmacro %}{{ f(60) }}"),
            "the template ran more than 250000 loop iterations and macro calls");
  EXPECT_EQ(message_of("{% for i in range(100000) %}" + std::string(4000, 'x') + "{% endfor %}"),
            "the template produced more than 268435456 bytes of strings and list items");
  // Numbers: no silent truncation of wide fields, no undefined conversions.
  EXPECT_EQ(render("{{ '%600d' % 5 }}"), std::string(599, ' ') + "5");
  EXPECT_EQ(render("{{ '%.3f|%-6d|' % (1.5, 42) }}"), "1.500|42    |");
  EXPECT_EQ(message_of("{{ '%d' % 1e300 }}"), "integers beyond 64 bits are not supported");
}

TEST(JinjaErrors, RuntimeErrorsCarryPositions) {
  TemplateError e = render_error("ok\n{{ 1 + 'a' }}");
  EXPECT_EQ(e.message(), "unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(render_error("{{ 'a' + 1 }}").message(),
            "can only concatenate str (not \"int\") to str");
  EXPECT_EQ(render_error("{{ 1 < 'a' }}").message(),
            "'<' not supported between instances of 'int' and 'str'");
  EXPECT_EQ(render_error("{{ 10 / 0 }}").message(), "division by zero");
  EXPECT_EQ(render_error("{{ 5 // 0 }}").message(), "integer division or modulo by zero");
  EXPECT_EQ(render_error("{% for x in 5 %}{% endfor %}").message(), "'int' object is not iterable");
  EXPECT_EQ(render_error("{% set a, b = [1] %}").message(),
            "not enough values to unpack (expected 2, got 1)");
  EXPECT_EQ(render_error("{{ foo() }}").message(), "'foo' is undefined");
  EXPECT_EQ(render_error("{{ 'abc'.foo() }}").message(), "'str object' has no attribute 'foo'");
  EXPECT_EQ(render_error("{{ [1].append(2) }}").message(),
            "access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(render_error("{{ x[1:2:0] }}", {{"x", {1}}}).message(), "slice step cannot be zero");
  EXPECT_EQ(render_error("{% macro f(a) %}{% endmacro %}{{ f(1, z=2) }}").message(),
            "macro 'f' takes no keyword argument 'z'");
  EXPECT_EQ(render_error("{{ 2 ** 100 }}").message(),
            "integer overflow: results beyond 64 bits are not supported");
  EXPECT_EQ(render_error("{{ [1]|select('odd')|length }}").message(),
            "object of type 'generator' has no len()");
  EXPECT_EQ(render_error("{{ 'x'|urlize }}").message(),
            "the 'urlize' filter is not supported by this template engine");
  EXPECT_EQ(render_error("{{ 'abc'.replace('a', 'x', count=1) }}").message(),
            "str.replace() takes no keyword arguments");
  EXPECT_EQ(render_error("{{ 'x'.zfill(3) }}").message(),
            "str.zfill() is not supported by this template engine");
  EXPECT_EQ(
      render_error("{% set ns = namespace(_x=1) %}").message().rfind("Chat templates cannot", 0),
      0u);
  EXPECT_EQ(render_error("{{ [1,2]|reverse }}").message(),
            "cannot print a generator; convert it with |list or |join first");
}

}  // namespace
}  // namespace nanovllm::jinja::testing
