// Builtin filters, and tojson as transformers defines it (json.dumps, ensure_ascii=False).
// Expected strings are what jinja2 3.1 with transformers' tojson renders.
#include "render_helpers.h"

namespace nanovllm::jinja::testing {
namespace {

TEST(JinjaFilters, Strings) {
  const Case cases[] = {
      {"{{ '  ab  '|trim }}|{{ 'xxabxx'|trim('x') }}|{{ 'hello world-foo'|title }}",
       "ab|ab|Hello World-Foo"},
      {"{{ 'hELLO wORLD'|capitalize }}|{{ 'AbC'|lower }}{{ 'aBc'|upper }}", "Hello world|abcABC"},
      {"{{ 'aaa'|replace('a','b',2) }}|{{ 'abc'|replace('', '-') }}", "bba|-a-b-c-"},
      {"{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\nb'|indent('--', "
       "first=true) }}",
       "a\n  b\n\n  c|  a\n  b|--a\n--b"},
      {"{{ 3|string|length }}{{ none|string }}{{ [1]|string }}", "1None[1]"},
      {"{{ '<a>'|e }}|{{ '<b>'|safe }}|{{ 'Hello'|center(9) }}|{{ 'a b c'|wordcount }}",
       "&lt;a&gt;|<b>|  Hello  |3"},
      {"{{ '%s %s'|format(1, 2) }}{{ '%(a)s'|format(a=2) }}", "1 22"},
      {"{{ 'abc'|length }} {{ '\u00e9'|length }} {{ 'abc'|reverse }}", "3 1 cba"},
      // Python's full case mappings and final-sigma rule.
      {"{{ 'ΟΔΟΣ straße'|lower }}|{{ 'straße ﬁ ŉ'|upper }}|"
       "{{ 'ﬁx ΣΑΣ'.title() }}|{{ 'İx'|lower|length }}",
       "οδος straße|STRASSE FI ʼN|Fix Σας|3"},
  };
  for (const Case& c : cases) expect_renders(c);
}

TEST(JinjaFilters, Numbers) {
  const Case cases[] = {
      {"{{ 3.7|int }}|{{ '3.7'|int }}|{{ 'x'|int }}|{{ '12'|float }}|{{ 3|float }}|{{ -3|abs }}",
       "3|3|0|12.0|3.0|3"},
      {"{{ 2.567|round(2) }}|{{ 2.5|round }}|{{ 3|round }}|{{ 2.5|round(0,'floor') }}|{{ "
       "1|round(1, 'ceil') }}",
       "2.57|2.0|3|2.0|1.0"},
      {"{{ 2.675|round(2) }}{{ 1.25|round(1) }}{{ 1.35|round(1) }}", "2.671.21.4"},
      {"{{ ' 42 '|int }}{{ '0x1A'|int(base=16) }}{{ 'bad'|int(7) }}", "42267"},
  };
  for (const Case& c : cases) expect_renders(c);
}

TEST(JinjaFilters, Sequences) {
  nlohmann::ordered_json ctx = {{"xs", {{{"n", 1}}, {{"n", 2}}, {{"n", 0}}}}};
  const Case cases[] = {
      {"{{ [3,1,2]|sort }}|{{ ['b','A','a']|sort }}|{{ [3,1,2]|sort(reverse=true) }}",
       "[1, 2, 3]|['A', 'a', 'b']|[3, 2, 1]"},
      {"{{ [none, none]|sort }}{{ [0, true, false, 1, 0.5]|sort }}{{ [u1, u2]|sort }}",
       "[None, None][0, False, 0.5, True, 1][Undefined, Undefined]"},
      {"{{ ['a','A','b']|unique|list }}|{{ [1,2,1]|unique|list }}", "['a', 'b']|[1, 2]"},
      {"{{ xs|map(attribute='n')|list }}|{{ xs|selectattr('n','odd')|list }}|{{ "
       "xs|rejectattr('n')|list }}",
       "[1, 2, 0]|[{'n': 1}]|[{'n': 0}]"},
      {"{{ xs|selectattr('n','equalto',2)|list }}|{{ xs|map(attribute='m', default='D')|join(',') "
       "}}",
       "[{'n': 2}]|D,D,D"},
      {"{{ ['a','b']|map('upper')|list }}|{{ [1,2,3]|select('odd')|list }}|{{ [1,0,2]|select|list "
       "}}",
       "['A', 'B']|[1, 3]|[1, 2]"},
      {"{{ [1,2,3]|reject('even')|list }}|{{ xs|sort(attribute='n')|map(attribute='n')|join }}",
       "[1, 3]|012"},
      {"{{ [1,2]|join }}|{{ [1,2]|join(', ') }}|{{ xs|join(',', attribute='n') }}",
       "12|1, 2|1,2,0"},
      {"{{ 'abc'|first }}{{ 'abc'|last }}{{ [1,2]|first }}{{ []|first }}|{{ 'ab'|list }}",
       "ac1|['a', 'b']"},
      {"{{ {'a':1}|list }}|{{ {'a':1}|items|list }}|{{ [1,2]|length }}{{ {'a':1}|count }}",
       "['a']|[('a', 1)]|21"},
      {"{{ [1,2,3]|reverse|list }}|{{ [1,3,2]|max }}{{ [1,3,2]|min }}{{ [1,3,2]|sum }}",
       "[3, 2, 1]|316"},
      {"{{ none|default('d') }}|{{ missing|default('d') }}|{{ ''|default('d', true) }}|{{ "
       "missing|d }}",
       "None|d|d|"},
      {"{{ {'b':1,'a':2}|dictsort }}|{{ [1,2,3]|batch(2)|list }}",
       "[('a', 2), ('b', 1)]|[[1, 2], [3]]"},
      {"{% set r = [1,2,3]|reverse %}{{ r|first }}{{ r|list }}", "3[2, 1]"},
  };
  for (const Case& c : cases) expect_renders(c, ctx);
}

TEST(JinjaFilters, ToJsonMatchesJsonDumps) {
  nlohmann::ordered_json ctx = {
      {"x", {{"b", 1}, {"a", {1.5, nullptr, true, "\u00e9\n\u2028\x7f\""}}}},
      {"y",
       {{"b", nlohmann::ordered_json::array({1, {{"c", 2}}})},
        {"a", "x"},
        {"e", nlohmann::ordered_json::object()}}}};
  const Case cases[] = {
      {"{{ x|tojson }}", "{\"b\": 1, \"a\": [1.5, null, true, \"\u00e9\\n\u2028\x7f\\\"\"]}"},
      {"{{ y|tojson(indent=2) }}",
       "{\n  \"b\": [\n    1,\n    {\n      \"c\": 2\n    }\n  ],\n  \"a\": \"x\",\n  \"e\": "
       "{}\n}"},
      {"{{ y|tojson(separators=(',',':')) }}", "{\"b\":[1,{\"c\":2}],\"a\":\"x\",\"e\":{}}"},
      {"{{ y|tojson(sort_keys=true) }}", "{\"a\": \"x\", \"b\": [1, {\"c\": 2}], \"e\": {}}"},
      {"{{ '\u00e9\U0001F600'|tojson(ensure_ascii=true) }}|{{ 1.0|tojson }}|{{ (1, 2)|tojson }}",
       "\"\\u00e9\\ud83d\\ude00\"|1.0|[1, 2]"},
      {"{{ {1: 2, none: 3}|tojson }}", "{\"1\": 2, \"null\": 3}"},
  };
  for (const Case& c : cases) expect_renders(c, ctx);
  EXPECT_EQ(render_error("{{ missing|tojson }}").message(),
            "Object of type Undefined is not JSON serializable");
}

}  // namespace
}  // namespace nanovllm::jinja::testing
