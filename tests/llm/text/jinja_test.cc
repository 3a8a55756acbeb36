// The chat-template Jinja subset (jinja.h). The table's expected outputs are what Jinja2 3.1
// renders for the same template and context, configured as transformers configures it
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, transformers'
// tojson): scoping, whitespace control, printing of Python values, slicing, filters, tests and
// methods. The rest checks the errors: unsupported constructs by name, raise_exception, limits.
#include "llm/text/jinja.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tunableop::llm::jinja {
namespace {

struct Case {
  const char* source;
  const char* context;  // JSON object
  const char* want;
};

StatusOr<std::string> render(const std::string& source, const std::string& context = "{}") {
  auto t = Template::parse(source, "t.jinja");
  if (!t.is_ok()) return t.status();
  return t->render(Value::from_json(nlohmann::ordered_json::parse(context)).as_dict());
}

TEST(Jinja, RendersAsJinja2Does) {
  const Case cases[] = {
      {"{% for i in range(3) %}{% if i == 0 %}{% set x = 1 %}{% endif %}[{{ x }}]{% endfor %}", "{}", "[1][][]"},
      {"{% set x = 5 %}{% for i in range(3) %}{% if i == 0 %}{% set x = 1 %}{% endif %}[{{ x }}]{% endfor %}{{x}}",
       "{}", "[1][5][5]5"},
      {"{% for i in range(3) %}{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.revindex }}{% endfor %}", "{}",
       "|1|30|2|21||1"},
      {"{{ none }}|{{ 1.0 }}|{{ 1e20 }}|{{ [1,'a',none, true] }}|{{ {'a': 1} }}|{{ 'it''s' }}|{{ 1e16 }}|{{ "
       "123456789.0 }}|{{ 0.0001 }}|{{ 0.00001 }}",
       "{}", "None|1.0|1e+20|[1, 'a', None, True]|{'a': 1}|its|1e+16|123456789.0|0.0001|1e-05"},
      {"{{ d.y | length }}", "{\"d\": {}}", "0"},
      {"[{{ 'ab' * 0 }}|{{ '' * 5 }}|{{ 'ab' * -2 }}|{{ 3 * 'ab' }}|{{ 'abc' * 5 }}]", "{}",
       "[|||ababab|abcabcabcabcabc]"},
      {"{{ d.y ~ 'a' }}", "{\"d\": {}}", "a"},
      {"  {% if true %}\n  x\n  {% endif %}\n  y\n", "{}", "  x\n  y"},
      {"a {% if true %} b {% endif %} c", "{}", "a  b  c"},
      {"{# c #}\nx\n  {# d #}\ny", "{}", "x\ny"},
      {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 4 / 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
       "{}", "3 -4 2 3.5 1024 2.0 3.0 0.5"},
      {"{{ 'abc'[::-1] }} {{ [1,2,3][-1] }} {{ [1,2,3][5] }}| {{ 'héllo'[1:3] }} {{ [1,2,3,4,5][::2] }} {{ "
       "[1,2,3,4,5][-2:] }} {{ [1,2,3][5:1:-1] }}",
       "{}", "cba 3 | él [1, 3, 5] [4, 5] [3]"},
      {"{{ {'a': 1, 'b': [1, 'x\"y\\n', none, 1.5, true]} | tojson }}", "{}",
       "{\"a\": 1, \"b\": [1, \"x\\\"y\\n\", null, 1.5, true]}"},
      {"{{ {'a': 1, 'b': [1, {}], 'c': []} | tojson(indent=2) }}", "{}",
       "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    {}\n  ],\n  \"c\": []\n}"},
      {"{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ true is number }} {{ 3 is "
       "divisibleby 3 }} {{ 4 is odd }} {{ [] is iterable }} {{ {} is mapping }}",
       "{}", "False True True True True True False True True"},
      {"{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}", "{}",
       "4"},
      {"{{ 1 if false }}|{{ 'y' if true else 'n' }}", "{}", "|y"},
      {"{{ [1,2] + [3] }} {{ 'ab' * 3 }} {{ 'x' ~ 1 ~ none ~ true }}", "{}", "[1, 2, 3] ababab x1NoneTrue"},
      {"{{ 0.1 + 0.2 }} {{ 1/3 }} {{ 2.5e-7 }} {{ -0.0 }}", "{}",
       "0.30000000000000004 0.3333333333333333 2.5e-07 -0.0"},
      {"{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b "
       "c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}",
       "{}", "a b|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a b', 'c']"},
      {"{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x','lo')) }} {{ 'abc'.upper() }} {{ 'hello world'.title() "
       "}} {{ 'HELLO'.capitalize() }}",
       "{}", "True True ABC Hello World Hello"},
      {"{{ ['a','b'] | join(', ') }} {{ 'abc' | list }} {{ [3,1,2] | sort }} {{ ['b','A','c'] | sort }} {{ [1,2,2,3] | "
       "unique | list }} {{ [1,5,3] | max }} {{ [1,5,3] | min }} {{ [1,2,3] | sum }}",
       "{}", "a, b ['a', 'b', 'c'] [1, 2, 3] ['A', 'b', 'c'] [1, 2, 3] 5 1 6"},
      {"{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('|') }} {{ msgs | "
       "rejectattr('role', 'eq', 'user') | list | length }}",
       "{\"msgs\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}, "
       "{\"role\": \"user\", \"content\": \"c\"}]}",
       "a|c 1"},
      {"{{ d | items | list }} {% for k, v in d.items() %}{{k}}={{v}};{% endfor %}{% for k in d %}{{k}}{% endfor %} {{ "
       "d | dictsort }}",
       "{\"d\": {\"b\": 1, \"a\": 2}}", "[('b', 1), ('a', 2)] b=1;a=2;ba [('a', 2), ('b', 1)]"},
      {"{{ x | default('dflt') }} {{ '' | default('e', true) }} {{ none | default('n') }}", "{}", "dflt e None"},
      {"{% for x in [] %}a{% else %}empty{% endfor %}{% for x in [1,2,3,4] if x is even %}{{ loop.index }}:{{ x }}{{ "
       "',' if not loop.last }}{% endfor %}",
       "{}", "empty1:2,2:4"},
      {"{% for x in range(10) %}{% if x == 3 %}{% continue %}{% endif %}{% if x == 6 %}{% break %}{% endif %}{{x}}{% "
       "endfor %}",
       "{}", "01245"},
      {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set s %}inner {{ a }}{% endset %}[{{ s }}]", "{}", "12[inner 1]"},
      {"{{ 'a' in 'cat' }} {{ 'x' not in ['x'] }} {{ 'k' in {'k':1} }} {{ not none }} {{ 1 and 'x' }} {{ 0 or 'y' }}",
       "{}", "True False True True x y"},
      {"{{ '%s' | trim }}{{ 5 | string + 'x' }} {{ '42' | int + 1 }} {{ 'x' | int }} {{ '3.5' | float }} {{ -3 | abs "
       "}} {{ 2.567 | round(1) }}",
       "{}", "%s5x 43 0 3.5 3 2.6"},
      {"x\n{%- if true -%}\n  y  \n{%- endif -%}\n z", "{}", "xyz"},
      {"{%+ if true %}  a\n{% endif +%}\nb", "{}", "  a\n\nb"},
      {"{% raw %}{{ not evaluated }}{% endraw %}", "{}", "{{ not evaluated }}"},
      {"{{ 'line1\\nline2' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}", "{}", "line1\n  line2|  a\n  b"},
      {"{{ messages[0]['content'] }} {{ messages[0].content }} {{ messages | length }} {{ messages[-1].role }}",
       "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", "hi hi 1 user"},
      {"{{ 'abc'.find('c') }} {{ 'aXbXc'.replace('X', '-') }} {{ 'a-b'.replace('-', '+', 1) }} {{ ','.join(['a','b']) "
       "}} {{ 'ab\\ncd'.splitlines() }}",
       "{}", "2 a-b-c a+b a,b ['ab', 'cd']"},
      {"{{ [1, [2, 3]] | tojson }} {{ 'é' | tojson }} {{ '\\u0001' | tojson }}", "{}", "[1, [2, 3]] \"é\" \"\\u0001\""},
      {"{{ true == 1 }} {{ 1 == 1.0 }} {{ 'a' == 'a' }} {{ [1] == [1] }} {{ {'a':1} == {'a':1} }} {{ none == none }}",
       "{}", "True True True True True True"},
      {"{{ 'a' < 'b' }} {{ 2 >= 2.0 }} {{ 1 < 2 < 3 }}", "{}", "True True True"},
      {"{{ ((1)) }} {{ (1,) }} {{ () }}", "{}", "1 (1,) ()"},
      {"{{ 'ab' | reverse }} {{ [1,2] | reverse | list }} {{ [1,2] | first }} {{ [1,2] | last }} {{ 'ab' | first }} {{ "
       "[] | first }}",
       "{}", "ba [2, 1] 1 2 a "},
      {"{% for m in messages %}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}",
       "{\"messages\": [1, 2]}", "0TrueFalse2 1FalseTrue2 "},
      {"{{ m.get('a') }} {{ m.get('z', 'd') }} {{ m.keys() | list }} {{ m.values() | list }}", "{\"m\": {\"a\": 1}}",
       "1 d ['a'] [1]"},
      {"{{ 'abc' | upper | lower }} {{ 'x' | e }} {{ '<a>' | e }}", "{}", "abc x &lt;a&gt;"},
      {"{{ -1 | abs }} {{ - 2 }} {{ 'a' is lower }} {{ 'A' is upper }} {{ none is sameas none }}", "{}",
       "1 -2 True True True"},
      {"{{ [1,2,3] | select('odd') | list }} {{ [1,2,3] | reject('odd') | list }} {{ [0,1,''] | select | list }}", "{}",
       "[1, 3] [2] [1]"},
      {"{{ ['a','b'] | map('upper') | list }}", "{}", "['A', 'B']"},
      {"{{ 5 is gt 3 }} {{ 5 is lt 3 }} {{ 5 is ge 5 }} {{ 'a' is in 'abc' }}", "{}", "True False True True"},
      {"{{ x.y if x is defined else 'u' }}", "{}", "u"},
      {"{%- for message in messages -%}\n  {{- message -}}\n{%- endfor %}", "{\"messages\": [\"a\", \"b\"]}", "ab"},
      {"{{ \"double\" ~ 'single' ~ \"it's\" }} {{ 'a\\tb' }} {{ 'q\\'q' }}", "{}", "doublesingleit's a\tb q'q"},
      {"{% set x = [1,2,3] %}{{ x[1:] }}{{ x[:-1] }}{{ x[0] }}", "{}", "[2, 3][1, 2]1"},
      {"{{ [1,2,3] | length }}{{ 'héllo' | length }}{{ {'a':1} | length }}{{ none | length if false else '' }}", "{}",
       "351"},
      {"{% if a is not defined %}nd{% endif %}{% if not a is defined %}nd2{% endif %}", "{}", "ndnd2"},
      {"{{ \"tools\" if tools else \"no tools\" }} {{ tools is none }}", "{\"tools\": null}", "no tools True"},
  };
  for (const Case& c : cases) {
    auto r = render(c.source, c.context);
    ASSERT_TRUE(r.is_ok()) << c.source << ": " << r.status().to_string();
    EXPECT_EQ(*r, c.want) << c.source;
  }
}

// Each error names the template, the line and what is wrong.
TEST(Jinja, ErrorsNameTheTemplateLineAndConstruct) {
  struct Bad {
    const char* source;
    StatusCode code;
    const char* expect;
  };
  const Bad cases[] = {
      {"a\n{% macro m() %}x{% endmacro %}", StatusCode::kParseError, "t.jinja:2: unsupported construct: {% macro %}"},
      {"{% call f() %}{% endcall %}", StatusCode::kParseError, "unsupported construct: {% call %}"},
      {"{% include 'x' %}", StatusCode::kParseError, "unsupported construct: {% include %}"},
      {"{% for x in y recursive %}{% endfor %}", StatusCode::kParseError, "a recursive {% for %}"},
      {"\n\n{{ x | frobnicate }}", StatusCode::kUnsupported, "t.jinja:3: unsupported filter 'frobnicate'"},
      {"{{ x is frobnicated }}", StatusCode::kUnsupported, "unsupported test 'frobnicated'"},
      {"{{ 'a'.zfill(3) }}", StatusCode::kUnsupported, "unsupported method str.zfill()"},
      {"{{ cycler(1) }}", StatusCode::kUnsupported, "unsupported function cycler()"},
      {"{% if x %}", StatusCode::kParseError, "{% endif %} is missing"},
      {"{% for x in y %}", StatusCode::kParseError, "{% endfor %} is missing"},
      {"{{ 1 + }}", StatusCode::kParseError, "expected an expression"},
      {"{{ 'abc }}", StatusCode::kParseError, "a string is never closed"},
      {"{# never closed", StatusCode::kParseError, "a comment ({# ... #}) is never closed"},
      {"{{ x", StatusCode::kParseError, "never closed"},
      {"{% frobnicate %}", StatusCode::kParseError, "unknown statement {% frobnicate %}"},
      {"{{ raise_exception('Roles must alternate') }}", StatusCode::kInvalidArgument,
       "t.jinja:1: the template refused the conversation: Roles must alternate"},
      {"{{ x.y }}", StatusCode::kInvalidArgument, "'x' is undefined (looking up 'y' in it)"},
      {"{{ 'a' + 1 }}", StatusCode::kInvalidArgument, "unsupported operand types for +"},
      {"{{ 1 // 0 }}", StatusCode::kInvalidArgument, "division by zero"},
      {"{{ 10 ** 20 }}", StatusCode::kInvalidArgument, "integer overflow"},
      {"{{ range(100000000) | length }}", StatusCode::kResourceExhausted, "range: more than 65536 items"},
      {"{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
       StatusCode::kInvalidArgument, "a list nested deeper than 200 levels"},
      {"{{ 'x' * 100000000 }}", StatusCode::kResourceExhausted, "passes 64 MiB"},
      {"{% set ns = 1 %}{% set ns.a = 2 %}", StatusCode::kInvalidArgument, "ns is not a namespace()"},
      {"{% break %}", StatusCode::kInvalidArgument, "outside a loop"},
      // Found by fuzz/chat_template_fuzzer: work that grows without the output growing.
      {"{% for a in range(65536) %}{% for b in range(65536) %}{% endfor %}{% endfor %}", StatusCode::kResourceExhausted,
       "the template passed its work limit (20000000 steps"},
      {"{% set s = 'x' * 60000000 %}{% for i in range(65536) %}{% if s %}{% endif %}{% endfor %}",
       StatusCode::kResourceExhausted, "work limit"},
      {"{% set xs = range(65536) %}{% for i in xs %}{% if i in xs %}{% endif %}{% endfor %}",
       StatusCode::kResourceExhausted, "work limit"},
      {"{{ range(65536) | unique | length }}", StatusCode::kResourceExhausted, "work limit"},
      {"{% set xs = range(60000) %}{{ ([xs] * 60000) | length }}", StatusCode::kResourceExhausted, "work limit"},
      {"{% set ns = namespace(a=1) %}{% set ns.a = ns %}", StatusCode::kInvalidArgument,
       "{% set ns.a %}: a namespace cannot hold a namespace"},
      {"{% set ns = namespace(a=1) %}{% set ns.a = {'x': [ns]} %}", StatusCode::kInvalidArgument,
       "cannot hold a namespace"},
      {"{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = dict(a=ns.x) %}{% endfor %}{{ ns.x }}",
       StatusCode::kInvalidArgument, "a value nested deeper than 200 levels"},
  };
  for (const Bad& c : cases) {
    auto r = render(c.source);
    ASSERT_FALSE(r.is_ok()) << c.source << " rendered " << *r;
    EXPECT_EQ(r.status().code(), c.code) << c.source << ": " << r.status().to_string();
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << c.source << ": " << r.status().message();
    EXPECT_EQ(r.status().message().rfind("t.jinja:", 0), 0u) << r.status().message();
  }
}

TEST(Jinja, TemplatesAreUtf8AndStringsOfAnyBytesAreSafe) {
  auto t = Template::parse("ab\xff{{ x }}", "t.jinja");
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().message(), "t.jinja: not valid UTF-8 (the byte at offset 2)");
  // A value that is not UTF-8 (the context is the caller's) goes through the string functions:
  // each ill-formed run is one U+FFFD, as Python's errors="replace" reads it. A lead byte at
  // the end once read past the string.
  auto ok = Template::parse("{{ s|trim }}|{{ s|length }}|{{ s[-1] }}|{{ s|list|length }}", "t.jinja");
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  Dict context;
  context.set("s", Value(std::string(" \xe9t\xc3 \xe4\xbd")));
  auto r = ok->render(context);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(*r, "\xEF\xBF\xBDt\xEF\xBF\xBD \xEF\xBF\xBD|6|\xEF\xBF\xBD|6");
}

TEST(Jinja, DeepNestingIsAnErrorNotACrash) {
  for (const auto& [open, close] :
       {std::pair<std::string, std::string>{"(", ")"}, {"[", "]"}, {"not ", ""}, {"-", ""}}) {
    std::string src = "{{ ";
    for (int i = 0; i < 100000; ++i) src += open;
    src += "1";
    for (int i = 0; i < 100000; ++i) src += close;
    auto r = render(src + " }}");
    ASSERT_FALSE(r.is_ok()) << open;
    EXPECT_NE(r.status().message().find("nested deeper"), std::string::npos) << r.status().message();
  }
  std::string blocks;
  for (int i = 0; i < 100000; ++i) blocks += "{% if true %}";
  auto r = render(blocks);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("nested deeper"), std::string::npos) << r.status().message();
}

TEST(Jinja, WhitespaceControlAsTransformersConfiguresIt) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it;
  // {{ }} keeps both; - strips everything; the template's one trailing newline is dropped.
  auto r =
      render("{% for x in xs %}\n  {% if x %}\n    [{{ x }}]\n  {% endif %}\n{% endfor %}\n", R"({"xs": [1, 0, 2]})");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "    [1]\n    [2]\n");
  r = render("a\r\nb  {{- ' c ' -}}  \n d\n");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "a\nb c d");
}

}  // namespace
}  // namespace tunableop::llm::jinja
