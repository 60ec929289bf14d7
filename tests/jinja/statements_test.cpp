// Statements: for (loop variables, else, filters, unpacking, break/continue), if, set (incl.
// namespace and block set), macros and call blocks, with, filter blocks, generation blocks.
// Expected strings are what jinja2 3.1 renders.
#include "render_helpers.h"

namespace nanovllm::jinja::testing {
namespace {

TEST(JinjaStatements, ForLoops) {
  nlohmann::ordered_json ctx = {{"xs", {1, 2, 3}}, {"d", {{"b", 1}, {"a", 2}}}};
  const Case cases[] = {
      {"{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
       "{{ loop.length }}{{ loop.revindex }},{% endfor %}",
       "10TrueFalse33,21FalseFalse32,32FalseTrue31,"},
      {"{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}", "-2;1-3;2-;"},
      {"{% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }} {% endfor %}", "1/2 2/2 "},
      {"{% for x in [] %}{{ x }}{% else %}E{% endfor %}", "E"},
      {"{% for x in xs if x > 5 %}{{ x }}{% else %}none{% endfor %}", "none"},
      {"{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", "b=1,a=2,"},
      {"{% for k in d %}{{ k }},{% endfor %}{% for c in 'ab' %}{{ c }}.{% endfor %}", "b,a,a.b."},
      {"{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}"
       "{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}",
       "02"},
      {"{% for a, b in [(1,2),(3,4)] %}{{ a+b }}{% endfor %}{{ range(1,10,3)|list }}",
       "37[1, 4, 7]"},
      {"{% for x in xs %}{% for y in xs %}{% if y == 2 %}{% break %}{% endif %}{{ x }}{{ y }} "
       "{% endfor %}{% endfor %}",
       "11 21 31 "},
      {"{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}", "aba"},
      {"{% for x in xs[::-1] %}{{ x }}{% endfor %}", "321"},
  };
  for (const Case& c : cases) expect_renders(c, ctx);
}

TEST(JinjaStatements, ScopingMatchesJinja2) {
  const Case cases[] = {
      // A set inside a loop body does not leak out, nor into the next iteration.
      {"{% set x = 5 %}{% for i in [1,2] %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}", "[5][5]5"},
      {"{% for i in [1,2] %}{% if i == 2 %}[{{ x }}]{% endif %}{% set x = i %}{% endfor %}", "[]"},
      // if blocks do not open a scope.
      {"{% if true %}{% set y = 3 %}{% endif %}{{ y }}", "3"},
      // namespace() carries state out of loops.
      {"{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{% for i in [1,2] %}"
       "{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}|{{ ns }}",
       "5|<Namespace {'a': 5}>"},
      // A namespace that holds itself, or a macro that leads back to it (freed after the render:
      // the sanitizer build's leak check).
      {"{% set ns = namespace(n=1) %}{% set ns.me = ns %}{{ ns.me.me.n }}", "1"},
      {"{% set ns = namespace() %}{% macro m() %}{{ 7 }}{% endmacro %}{% set ns.m = m %}"
       "{{ ns.m() }}",
       "7"},
      {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}", "12(1, 2)"},
      {"{% set x %}  block {{ 1 }} {% endset %}[{{ x }}]", "[  block 1 ]"},
      {"{% set x | upper %}abc{% endset %}[{{ x }}]", "[ABC]"},
      {"{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", "3[]"},
  };
  for (const Case& c : cases) expect_renders(c);
}

TEST(JinjaStatements, NamesAssignedInAScopeAreLocalToAllOfIt) {
  // jinja2 decides at compile time: a name set anywhere in a scope is that scope's own name from
  // the scope's start, so reads before the set do not see the context's value.
  nlohmann::ordered_json ctx = {{"s", "ctx"}, {"d", {{"a", 1}}}};
  const Case cases[] = {
      {"{{ s }}{% set s = 1 %}{{ s }}", "ctx1"},
      {"{% for i in [1] %}[{{ s }}]{% endfor %}{% set s = 1 %}{{ s }}", "[]1"},
      {"{% for i in [1,2] %}{{ s }}{% set s = i %}{% endfor %}", "ctxctx"},
      {"{% set s = 0 %}{% for i in [1,2] %}{{ s }}{% set s = i %}{% endfor %}", "00"},
      {"{% for i in [1,2] %}{% for j in [1] %}[{{ s }}]{% endfor %}{% set s = i %}{% endfor %}",
       "[][]"},
      {"{% macro m() %}[{{ s }}]{% endmacro %}{{ m() }}{% set s = 1 %}{{ m() }}", "[][1]"},
      {"{% for i in [1] %}{% if false %}{% set s = 2 %}{% endif %}[{{ s }}]{% endfor %}", "[ctx]"},
      {"{% set v %}{{ s }}{% set s = 2 %}{% endset %}{{ v }}", "ctx"},
      {"{% macro m(a) %}{{ s }}{% set s = 3 %}{{ s }}{% endmacro %}{{ m(1) }}", "ctx3"},
  };
  for (const Case& c : cases) expect_renders(c, ctx);
  EXPECT_EQ(render_error("{% for i in [1] %}{% set loop = 5 %}{% endfor %}").message(),
            "Can't assign to special loop variable in for-loop target");
}

TEST(JinjaStatements, IfElifElse) {
  const Case cases[] = {
      {"{% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %}", "c"},
      {"{% if none %}a{% else %}b{% endif %}", "b"},
      {"{% if 1 and not 0 %}y{% endif %}", "y"},
  };
  for (const Case& c : cases) expect_renders(c);
}

TEST(JinjaStatements, MacrosAndCallBlocks) {
  const Case cases[] = {
      {"{% macro m(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }}|{{ m(1, b=3) }}|{{ m(b=4, "
       "a=0) }}",
       "1-2|1-3|0-4"},
      {"{% macro m(a) %}[{{ caller() }}{{ a }}]{% endmacro %}{% call m(1) %}body{% endcall %}",
       "[body1]"},
      {"{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, x=3) }}",
       "(1, 2){'x': 3}"},
      {"{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}", "[]"},
      {"{% macro m(x) %}{{ caller(x * 2) }}{% endmacro %}{% call(v) m(3) %}<{{ v }}>{% endcall %}",
       "<6>"},
      {"{% set g = 'G' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", "G"},
      {"{% macro m(a, b=a * 2) %}{{ b }}{% endmacro %}{{ m(4) }}", "8"},
      {"{% macro f(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}"
       "{{ f(*[1, 2, 3]) }}|{{ f(**{'a': 5, 'z': 1}) }}",
       "12(3,){}|52(){'z': 1}"},
      {"{% set d = {'a': 1} %}{{ namespace(**d).a }}{{ dict(d, b=2) }}", "1{'a': 1, 'b': 2}"},
      // A keyword naming a parameter already given positionally lands in kwargs.
      {"{% macro f(x) %}{{ x }}|{{ kwargs.get('x') }}{% endmacro %}{{ f(1, x=2) }}", "1|2"},
      {"{% macro f(a, b=5) %}{{ a }}{{ b }}{% endmacro %}[{{ f(missing) }}]", "[5]"},
  };
  for (const Case& c : cases) expect_renders(c);
  EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").message(),
            "macro 'm' takes not more than 1 argument(s)");
}

TEST(JinjaStatements, FilterGenerationAndGlobals) {
  const Case cases[] = {
      {"{% filter upper %}abc {{ 'd' }}{% endfilter %}", "ABC D"},
      {"{% filter trim|upper %}  x  {% endfilter %}", "X"},
      {"{% generation %}gen {{ 1 }}{% endgeneration %}", "gen 1"},
      {"{{ dict(a=1) }}{{ namespace(b=2).b }}{{ range(3)|list }}", "{'a': 1}2[0, 1, 2]"},
      {"{{ strftime_now('%Y') is string }}{{ strftime_now('%Y')|length }}", "True4"},
      {"{% print 'p', 1 %}", "p1"},
  };
  for (const Case& c : cases) expect_renders(c);
}

TEST(JinjaStatements, RaiseException) {
  TemplateError e = render_error("ok{{ raise_exception('Conversation roles must alternate') }}");
  EXPECT_TRUE(e.raised_by_template());
  EXPECT_STREQ(e.what(), "Conversation roles must alternate");
  EXPECT_EQ(e.line(), 1);
}

}  // namespace
}  // namespace nanovllm::jinja::testing
