// The Jinja subset chat templates are written in, with our own lexer, parser and evaluator,
// configured as transformers renders chat templates (trim_blocks, lstrip_blocks, no autoescape,
// loop controls, default Undefined, its tojson):
//   {{ expr }}, {% stmt %}, {# comments #}, whitespace control ({%- -%}, {%+ +%}), {% raw %}
//   if / elif / else, for (tuple targets, "if" filter, else, loop.index/index0/revindex/first/
//   last/length/previtem/nextitem), break / continue, set (names, namespace attributes, blocks),
//   {% generation %} (rendered as is)
//   literals (strings, numbers, true/false/none, lists, tuples, dicts), attribute and item
//   access, slicing with steps, arithmetic (+ - * / // % **), ~, comparisons, in / not in,
//   and / or / not, "a if c else b"
//   filters: abs attr capitalize count default/d dictsort escape/e first float indent int items
//     join last length list lower map max min reject rejectattr replace reverse round safe
//     select selectattr sort string sum title tojson trim unique upper wordcount
//   tests: boolean callable defined divisibleby eq/equalto/== escaped even false float ge gt in
//     integer iterable le lower lt mapping ne none number odd sameas sequence string true
//     undefined upper
//   methods: str.strip/lstrip/rstrip/split/rsplit/splitlines/startswith/endswith/upper/lower/
//     title/capitalize/replace/find/rfind/count/join/isdigit/isalpha/isspace,
//     dict.items/keys/values/get
//   globals: raise_exception, range, namespace, dict, strftime_now
// Anything else (macros, call blocks, includes, an unknown filter, test or method) is an
// error naming the template, the line and the construct; a template never renders silently
// wrong text for want of a feature.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "llm/text/jinja_value.h"
#include "tunableop/status.h"

namespace tunableop::llm::jinja {

struct Stmt;

class Template {
 public:
  // `name` prefixes every message ("DIR/chat_template.jinja:12: ...").
  static StatusOr<Template> parse(std::string_view source, const std::string& name);
  // Renders with `context`'s variables. raise_exception() in the template gives an error whose
  // message is the template's.
  StatusOr<std::string> render(const Dict& context) const;
  const std::string& name() const { return name_; }

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
  std::string name_;
};

}  // namespace tunableop::llm::jinja
