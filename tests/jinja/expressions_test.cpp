// Expression semantics: Python values, operators, precedence, Undefined, slicing, tests.
// Expected strings are what jinja2 3.1 renders.
#include "render_helpers.h"

namespace nanovllm::jinja::testing {
namespace {

TEST(JinjaExpressions, LiteralsPrintLikePython) {
  const Case cases[] = {
      {"{{ [1,'a',none,true,1.5,{'k':(1,2)}] }}", "[1, 'a', None, True, 1.5, {'k': (1, 2)}]"},
      {"{{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1/3 }}",
       "1e+16 1000000000000000.0 0.0001 1e-05 0.3333333333333333"},
      {"{{ 0.1+0.2 }} {{ -0.0 }} {{ 100.0 }} {{ 1.5e-7 }}",
       "0.30000000000000004 -0.0 100.0 1.5e-07"},
      {"{{ ['a\\'b', 'a\"b', 'a\\'\"b', '\\n\\x01\\u00e9\\u2028'] }}",
       "[\"a'b\", 'a\"b', 'a\\'\"b', '\\n\\x01\u00e9\\u2028']"},
      {"{{ (1,) }}{{ () }}{{ {'a': none} }}", "(1,)(){'a': None}"},
      {"{{ 1_000 }} {{ 0x10 }} {{ 0b101 }} {{ 0o17 }} {{ 1.5e3 }}", "1000 16 5 15 1500.0"},
      {"{{ 'a' 'b' }}{{ \"\\t\" }}", "ab\t"},
      {"{{ true }}|{{ none }}|{{ True }}|{{ None }}", "True|None|True|None"},
  };
  for (const Case& c : cases) expect_renders(c);
}

TEST(JinjaExpressions, Arithmetic) {
  const Case cases[] = {
      {"{{ 7//2 }} {{ -7//2 }} {{ -7%3 }} {{ 7/2 }} {{ 4/2 }} {{ 2**-1 }} {{ 2.0**2 }}",
       "3 -4 2 3.5 2.0 0.5 4.0"},
      {"{{ 1.5 // 0.4 }} {{ -1.5 % 0.4 }} {{ 7 % -3 }}", "3.0 0.10000000000000009 -2"},
      {"{{ 'abc' * 2 }}{{ [1] * 2 }}{{ 1 + 1.5 }}{{ true + 1 }}", "abcabc[1, 1]2.52"},
      {"{{ -2**2 }} {{ 2**3**2 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }}", "4 64 7 9"},
      {"{{ 'a' ~ 1 ~ none ~ 1.5 ~ [1] ~ undefined_name }}", "a1None1.5[1]"},
      {"{{ '%s-%d|%5.2f|%x|%r|%%' % ('a', 3, 3.14159, 255, 'q') }}", "a-3| 3.14|ff|'q'|%"},
      {"{{ [1, 2] + [3] }}{{ 'a' + 'b' }}", "[1, 2, 3]ab"},
  };
  for (const Case& c : cases) expect_renders(c);
}

TEST(JinjaExpressions, ComparisonsAndLogic) {
  const Case cases[] = {
      {"{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }}", "True True True True"},
      {"{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}", "TrueFalse"},
      {"{{ 3 in [1, 3.0] }} {{ 'a' in {'a':1} }} {{ 'b' in 'abc' }} {{ 'z' not in 'abc' }}",
       "True True True True"},
      {"{{ true and 'x' }}|{{ false or 0 }}|{{ none or [] }}|{{ not 0 }}", "x|0|[]|True"},
      {"{{ [1, 2] == (1, 2) }}{{ {'a':1,'b':2} == {'b':2,'a':1} }}", "FalseTrue"},
      {"{{ 'x' if false }}|{{ 'y' if 1 else 'n' }}|{{ 'a' if 0 else 'b' if 0 else 'c' }}", "|y|c"},
      {"{{ not 1 == 2 }}{{ not 'a' in 'abc' }}", "TrueFalse"},
  };
  for (const Case& c : cases) expect_renders(c);
}

TEST(JinjaExpressions, SubscriptsAndSlices) {
  nlohmann::ordered_json ctx = {{"xs", {1, 2, 3, 4}}, {"d", {{"items", 1}, {"a", {{"b", 2}}}}}};
  const Case cases[] = {
      {"{{ xs[::-1] }}{{ xs[1::2] }}{{ xs[-1] }}{{ xs[5] }}{{ xs[1:-1] }}{{ xs[10:] }}",
       "[4, 3, 2, 1][2, 4]4[2, 3][]"},
      {"{{ 'h\u00e9llo'[1:3] }} {{ 'h\u00e9llo'[::-1] }} {{ 'abcd'[-2:] }} {{ 'ab'[5] }}|",
       "\u00e9l oll\u00e9h cd |"},
      {"{{ d['items'] }} {{ d.a.b }} {{ d['a']['b'] }} {{ d.missing }}|{{ xs.0 }}", "1 2 2 |1"},
      {"{{ d.get('a') }} {{ d.get('z', 5) }} {{ d.get('z') }}", "{'b': 2} 5 None"},
      {"{{ d.items() }} {{ d.keys() }}",
       "dict_items([('items', 1), ('a', {'b': 2})]) dict_keys(['items', 'a'])"},
      {"{{ none.x }}|{{ xs.foo }}", "|"},
      {"{{ range(3) }}|{{ range(1, 10, 3)[1] }}|{{ range(3) == [0, 1, 2] }}|{{ range(2)|list }}",
       "range(0, 3)|4|False|[0, 1]"},
      {"{{ range(3)[-1:] }}|{{ range(3)[::-1] }}|{{ range(1, 10, 3)[1:] }}",
       "range(2, 3)|range(2, -1, -1)|range(4, 10, 3)"},
  };
  for (const Case& c : cases) expect_renders(c, ctx);
}

TEST(JinjaExpressions, UndefinedBehavesLikeJinja2) {
  const Case cases[] = {
      {"[{{ missing }}]", "[]"},
      {"{{ missing is defined }}{{ missing is undefined }}{{ missing is none }}", "FalseTrueFalse"},
      {"{{ missing|length }}{{ missing|default('d') }}{{ 'a' in missing }}", "0dFalse"},
      {"{% for x in missing %}x{% else %}empty{% endfor %}", "empty"},
      {"{{ missing == other_missing }}{{ missing ~ 'x' }}", "Truex"},
      {"{% if missing %}yes{% else %}no{% endif %}", "no"},
      {"[{{ '%s' % missing }}]{{ '%r' % missing }}{{ missing|upper }}{{ missing|join(',') }}",
       "[]Undefined"},
  };
  for (const Case& c : cases) expect_renders(c);
  // Attribute access on an undefined value raises, as in jinja2.
  EXPECT_EQ(render_error("{{ missing.attr }}").message(), "'missing' is undefined");
  EXPECT_EQ(render_error("{{ missing + 1 }}").message(), "'missing' is undefined");
  EXPECT_EQ(render_error("{{ missing|int }}").message(), "'missing' is undefined");
  EXPECT_EQ(render_error("{{ missing|indent }}").message(), "'missing' is undefined");
  EXPECT_EQ(render_error("{{ d.x.y }}", {{"d", nlohmann::ordered_json::object()}}).message(),
            "'dict object' has no attribute 'x'");
}

TEST(JinjaExpressions, IsTests) {
  const Case cases[] = {
      {"{{ 5 is even }}{{ 5 is odd }}{{ 'a' is string }}{{ 1 is number }}{{ true is number }}",
       "FalseTrueTrueTrueTrue"},
      {"{{ 1.0 is integer }}{{ 1 is integer }}{{ {} is mapping }}{{ 'a' is iterable }}",
       "FalseTrueTrueTrue"},
      {"{{ 'a' is sequence }}{{ {} is sequence }}{{ 1 is sequence }}{{ true is boolean }}",
       "TrueTrueFalseTrue"},
      {"{{ 1 is true }}{{ true is true }}{{ false is false }}{{ 0 is false }}",
       "FalseTrueTrueFalse"},
      {"{{ 1 is equalto 1 }}{{ 1 is eq 1.0 }}{{ 2 is ne 2 }}{{ 6 is divisibleby 3 }}",
       "TrueTrueFalseTrue"},
      {"{{ none is none }}{{ 1 is not none }}{{ 'a' is in 'abc' }}{{ 3 is gt 2 }}",
       "TrueTrueTrueTrue"},
      {"{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ range is callable }}", "TrueTrueTrue"},
  };
  for (const Case& c : cases) expect_renders(c);
}

TEST(JinjaExpressions, StringMethods) {
  const Case cases[] = {
      {"{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a,b,c'.split(',', 1) }}",
       "['a', 'b', '', 'c']['a', 'b']['a', 'b,c']"},
      {"{{ 'a,b,c'.rsplit(',', 1) }}{{ 'a b'.split(none, 1) }}", "['a,b', 'c']['a', 'b']"},
      {"{{ ' 1 2 3 '.split(none, 1) }}{{ ' 1 2 3 '.rsplit(none, 1) }}{{ 'a b'.split(maxsplit=0) }}",
       "['1', '2 3 '][' 1 2', '3']['a b']"},
      {"{{ 'xxhixx'.strip('x') }}|{{ '  hi '.lstrip() }}|{{ '\\nhi\\n'.rstrip('\\n') }}|",
       "hi|hi |\nhi|"},
      {"{{ 'ab\\ncd\\r\\nef'.splitlines() }}{{ 'abcabc'.find('c') }}{{ 'abcabc'.count('b') }}",
       "['ab', 'cd', 'ef']22"},
      {"{{ 'abc'.startswith(('x','a')) }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith('b') }}",
       "TrueTrueFalse"},
      {"{{ '{} and {}'.format(1, 'b') }}|{{ '{0}{x}'.format(1, x=2) }}", "1 and b|12"},
      {"{{ 'hello wORLD(x) o\\'neil'.title() }}|{{ 'hELLO'.capitalize() }}",
       "Hello World(X) O'Neil|Hello"},
      {"{{ 'AbC'.upper() }}{{ 'AbC'.lower() }}{{ 'aaa'.replace('a', 'b', 2) }}", "ABCabcbba"},
      {"{{ '-'.join(['a', 'b']) }}{{ 'x'.rjust(3, '.') }}{{ '12'.isdigit() }}", "a-b..xTrue"},
  };
  for (const Case& c : cases) expect_renders(c);
}

}  // namespace
}  // namespace nanovllm::jinja::testing
