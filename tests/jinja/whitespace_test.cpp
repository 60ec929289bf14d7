// Whitespace handling with transformers' settings (trim_blocks, lstrip_blocks), `-`/`+` markers,
// comments, raw blocks and the dropped trailing newline. Expected strings are jinja2's output.
#include "render_helpers.h"

namespace nanovllm::jinja::testing {
namespace {

TEST(JinjaWhitespace, TrimAndLstripBlocks) {
  const Case cases[] = {
      {"a\n  {% if true %}\n  x\n  {% endif %}\n b\n", "a\n  x\n b"},
      {"a  {% if true %}x{% endif %}  \nb", "a  x  \nb"},
      {"  {{ 'v' }}\n{# c #}\n  {# c2 #}  y\n", "  v\n  y"},
      {"{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n", "  1\n  2\n"},
      {"x\n    {% set a = 1 %}\ny", "x\ny"},
  };
  for (const Case& c : cases) expect_renders(c);
}

TEST(JinjaWhitespace, ExplicitMarkers) {
  const Case cases[] = {
      {"a {%- if true -%} \n x \n {%- endif %}\n\n", "ax"},
      {"a {%+ if true %}x{% endif %}", "a x"},
      {"a\n  {{- 'b' -}}  \n c", "abc"},
      {"a  {#- comment -#}  b", "ab"},
      {"[ {{ 'x' }} ]", "[ x ]"},
      {"  {%+ if true %}x{% endif %}", "  x"},
  };
  for (const Case& c : cases) expect_renders(c);
}

TEST(JinjaWhitespace, RawAndNewlines) {
  const Case cases[] = {
      {"{% raw %}{{ x }}{% endraw %}\nz", "{{ x }}z"},
      {"\n\n", "\n"},
      {"x\r\ny\rz", "x\ny\nz"},
      {"{# only a comment #}", ""},
      {"a{#\nmulti\nline\n#}b", "ab"},
  };
  for (const Case& c : cases) expect_renders(c);
}

}  // namespace
}  // namespace nanovllm::jinja::testing
