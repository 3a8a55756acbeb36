// The parsed form of a chat template (jinja.h): statements and expressions, each with the line
// it came from for messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "llm/text/jinja_value.h"

namespace tunableop::llm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // args: the items; name "tuple" for a tuple
    kDict,       // args: key, value, key, value, ...
    kAttr,       // args[0].name
    kIndex,      // args[0][args[1]]
    kSlice,      // args[0][args[1]:args[2]:args[3]] (null: omitted)
    kCall,       // args[0](args[1..], kwargs)
    kFilter,     // args[0] | name(args[1..], kwargs)
    kTest,       // args[0] is [not] name(args[1..]); negated
    kNot,        // not args[0]
    kNeg,        // -args[0]
    kPos,        // +args[0]
    kBinary,     // args[0] op args[1]: + - * / // % ** ~ == != < <= > >= in, "not in"
    kAnd,        // args[0] and args[1]
    kOr,         // args[0] or args[1]
    kCondition,  // args[0] if args[1] else args[2] (args[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;  // a name, attribute, filter, test or operator
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kPrint,     // {{ expr }}
    kIf,        // conditions[i] -> bodies[i]; else_body
    kFor,       // for targets in expr [if filter]: bodies[0]; else_body
    kSet,       // set targets = expr (targets[0] "ns.attr" for a namespace attribute)
    kSetBlock,  // {% set targets[0] %}bodies[0]{% endset %}
    kBreak,
    kContinue,
    kBlock,  // bodies[0] rendered as it is ({% generation %}, {% filter %} is not supported)
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr, filter;
  std::vector<std::string> targets;
  std::string attr;  // set ns.attr
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body else_body;
};

}  // namespace tunableop::llm::jinja
