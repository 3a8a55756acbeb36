// The chat-template evaluator (jinja.h): statements and expressions over jinja_value.h's
// values, with Jinja's scoping (a for loop's body gets a fresh scope per iteration; if does not
// scope; namespaces are shared and mutable).
#include "llm/text/jinja.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <unordered_map>

#include "llm/text/jinja_ast.h"
#include "llm/text/jinja_builtins.h"
#include "llm/text/jinja_parse.h"
#include "llm/text/utf8.h"

namespace tunableop::llm::jinja {

namespace {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  Scope* parent = nullptr;
  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

// The indices a Python slice [start:stop:step] picks from n items.
StatusOr<std::vector<size_t>> slice_picks(size_t n, const Value* start, const Value* stop, const Value* step) {
  auto as_int = [](const Value* v, const char* what) -> StatusOr<std::optional<int64_t>> {
    if (!v || v->is_none()) return std::optional<int64_t>();
    if (v->kind() != Value::Kind::kInt && v->kind() != Value::Kind::kBool) {
      return Status::invalid_argument(std::string("a slice's ") + what + " must be an integer, not a " +
                                      v->type_name());
    }
    return std::optional<int64_t>(v->as_int());
  };
  auto b = as_int(start, "start"), e = as_int(stop, "stop"), s = as_int(step, "step");
  for (const auto* x : {&b, &e, &s}) {
    if (!x->is_ok()) return x->status();
  }
  const int64_t len = int64_t(n);
  const int64_t st = s->value_or(1);
  if (st == 0) return Status::invalid_argument("a slice's step must not be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v < 0 ? *v + len : *v;
    if (st > 0) return std::clamp<int64_t>(x, 0, len);
    return std::clamp<int64_t>(x, -1, len - 1);
  };
  const int64_t from = clamp(*b, st > 0 ? 0 : len - 1), to = clamp(*e, st > 0 ? len : -1);
  std::vector<size_t> picks;
  for (int64_t i = from; st > 0 ? i < to : i > to; i += st) picks.push_back(size_t(i));
  return picks;
}

class Renderer {
 public:
  Renderer(const std::string& name, std::string& out) : name_(name), out_(out) {}

  Status body(const Body& stmts, Scope& scope, Flow& flow) {
    for (const auto& s : stmts) {
      TUNABLEOP_RETURN_IF_ERROR(statement(*s, scope, flow));
      if (flow != Flow::kNormal) return Status::ok();
    }
    return Status::ok();
  }

 private:
  Status at(int line, const Status& st) const {
    return Status(st.code(), name_ + ":" + std::to_string(line) + ": " + st.message());
  }
  Status err(int line, const std::string& what) const {
    return Status::invalid_argument(name_ + ":" + std::to_string(line) + ": " + what);
  }
  Status emit(const std::string& s, int line) {
    if (out_.size() + s.size() > kMaxOutputBytes) {
      return Status::resource_exhausted(name_ + ":" + std::to_string(line) + ": the output passes 64 MiB");
    }
    out_ += s;
    return Status::ok();
  }

  Status statement(const Stmt& s, Scope& scope, Flow& flow) {
    switch (s.kind) {
      case Stmt::Kind::kText: return emit(s.text, s.line);
      case Stmt::Kind::kPrint: {
        auto v = eval(*s.expr, scope);
        if (!v.is_ok()) return v.status();
        TUNABLEOP_RETURN_IF_ERROR(charge(v->weight(), s.line));  // str() walks it
        return emit(v->str(), s.line);
      }
      case Stmt::Kind::kIf:
        for (size_t i = 0; i < s.conditions.size(); ++i) {
          auto c = eval(*s.conditions[i], scope);
          if (!c.is_ok()) return c.status();
          if (c->truthy()) return body(s.bodies[i], scope, flow);
        }
        return body(s.else_body, scope, flow);
      case Stmt::Kind::kFor: return for_loop(s, scope, flow);
      case Stmt::Kind::kSet: {
        auto v = eval(*s.expr, scope);
        if (!v.is_ok()) return v.status();
        if (!s.attr.empty()) {
          const Value* ns = scope.find(s.targets[0]);
          if (!ns || ns->kind() != Value::Kind::kNamespace) {
            return err(s.line,
                       "{% set " + s.targets[0] + "." + s.attr + " %}: " + s.targets[0] + " is not a namespace()");
          }
          if (v->holds_namespace())
            return err(s.line, "{% set " + s.targets[0] + "." + s.attr + " %}: a namespace cannot hold a namespace");
          const_cast<Value*>(ns)->mutable_dict().set(s.attr, std::move(*v));  // namespaces are shared objects
          return Status::ok();
        }
        return assign(s.targets, std::move(*v), scope, s.line);
      }
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        Renderer inner(name_, captured);
        Flow f = Flow::kNormal;
        TUNABLEOP_RETURN_IF_ERROR(inner.body(s.bodies[0], scope, f));
        scope.vars[s.targets[0]] = Value(captured);
        return Status::ok();
      }
      case Stmt::Kind::kBreak:
      case Stmt::Kind::kContinue:
        if (loops_ == 0) return err(s.line, "{% break %} / {% continue %} outside a loop");
        flow = s.kind == Stmt::Kind::kBreak ? Flow::kBreak : Flow::kContinue;
        return Status::ok();
      case Stmt::Kind::kBlock: return body(s.bodies[0], scope, flow);
    }
    return Status::ok();
  }

  Status assign(const std::vector<std::string>& targets, Value v, Scope& scope, int line) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = std::move(v);
      return Status::ok();
    }
    if (!v.is_list() || v.as_list().size() != targets.size()) {
      return err(line, "cannot unpack " + v.type_name() + " into " + std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = v.as_list()[i];
    return Status::ok();
  }

  Status for_loop(const Stmt& s, Scope& scope, Flow& flow) {
    auto seq = eval(*s.expr, scope);
    if (!seq.is_ok()) return seq.status();
    List items;
    switch (seq->kind()) {
      case Value::Kind::kList: items = seq->as_list(); break;
      case Value::Kind::kDict:
        for (const auto& kv : seq->as_dict().items) items.emplace_back(kv.first);
        break;
      case Value::Kind::kString: {
        const auto cps = utf8::code_points(seq->as_string());
        for (size_t i = 0; i < cps.size(); ++i) items.emplace_back(utf8::from_code_points(cps, i, i + 1));
        break;
      }
      case Value::Kind::kUndefined: break;
      default: return err(s.line, "cannot iterate over a " + seq->type_name() + " in {% for %}");
    }
    if (s.filter) {  // "for x in xs if cond": filtered before loop.* counts
      List kept;
      for (const Value& item : items) {
        TUNABLEOP_RETURN_IF_ERROR(charge(kLoopTurnWork, s.line));
        Scope iter{{}, &scope};
        TUNABLEOP_RETURN_IF_ERROR(assign(s.targets, item, iter, s.line));
        auto keep = eval(*s.filter, iter);
        if (!keep.is_ok()) return keep.status();
        if (keep->truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return body(s.else_body, scope, flow);
    ++loops_;
    const int64_t n = int64_t(items.size());
    for (int64_t i = 0; i < n; ++i) {
      TUNABLEOP_RETURN_IF_ERROR(charge(kLoopTurnWork, s.line));
      Scope iter{{}, &scope};  // fresh per iteration, as Jinja's
      TUNABLEOP_RETURN_IF_ERROR(assign(s.targets, items[size_t(i)], iter, s.line));
      Dict loop;
      loop.items = {{"index0", Value(i)},
                    {"index", Value(i + 1)},
                    {"revindex0", Value(n - i - 1)},
                    {"revindex", Value(n - i)},
                    {"first", Value(i == 0)},
                    {"last", Value(i == n - 1)},
                    {"length", Value(n)},
                    {"depth", Value(int64_t(1))},
                    {"depth0", Value(int64_t(0))},
                    {"previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined("'loop.previtem' is undefined")},
                    {"nextitem", i + 1 < n ? items[size_t(i + 1)] : Value::undefined("'loop.nextitem' is undefined")}};
      iter.vars["loop"] = Value(std::move(loop));
      Flow f = Flow::kNormal;
      TUNABLEOP_RETURN_IF_ERROR(body(s.bodies[0], iter, f));
      if (f == Flow::kBreak) break;
    }
    --loops_;
    return Status::ok();
  }

  StatusOr<Args> args_of(const Expr& e, size_t first, Scope& scope) {
    Args a;
    for (size_t i = first; i < e.args.size(); ++i) {
      auto v = eval(*e.args[i], scope);
      if (!v.is_ok()) return v.status();
      a.pos.push_back(std::move(*v));
    }
    for (const auto& [k, x] : e.kwargs) {
      auto v = eval(*x, scope);
      if (!v.is_ok()) return v.status();
      a.kw.emplace_back(k, std::move(*v));
    }
    return a;
  }

  // Every value an expression makes is paid for by its weight (a lookup by its text only: lists
  // and dicts are shared, strings copied), and made values are bounded in depth, whatever
  // construct made them.
  StatusOr<Value> eval(const Expr& e, Scope& scope) {
    auto v = eval_node(e, scope);
    if (!v.is_ok()) return v;
    using K = Expr::Kind;
    const bool lookup = e.kind == K::kLiteral || e.kind == K::kName || e.kind == K::kAttr || e.kind == K::kIndex;
    TUNABLEOP_RETURN_IF_ERROR(charge((!lookup || v->is_string()) ? v->weight() : 1, e.line));
    if (!lookup && v->depth() > kMaxValueDepth)
      return err(e.line, "a value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
    return v;
  }

  // A loop turn makes a scope, binds its targets and the loop variable's dict of 11 entries:
  // in time (12 us under ASan) as much as a value of a few hundred items, so it costs 256. A
  // render then stops within about 80k turns; a real template over 2,000 messages takes 6k.
  static constexpr uint64_t kLoopTurnWork = 256;

  // The work limit (kMaxRenderWork): what a render may cost, in the units of Value::weight()
  // and loop turns. A real chat template over a long conversation costs well under a million;
  // without a limit two nested loops over range(65536) ran for hours (fuzz/chat_template_fuzzer).
  Status charge(uint64_t units, int line) {
    work_ = saturating_add(work_, units);
    if (work_ <= kMaxRenderWork) return Status::ok();
    return Status::resource_exhausted(name_ + ":" + std::to_string(line) + ": the template passed its work limit (" +
                                      std::to_string(kMaxRenderWork) + " steps: loop turns and values made)");
  }

  StatusOr<Value> eval_node(const Expr& e, Scope& scope) {
    using K = Expr::Kind;
    switch (e.kind) {
      case K::kLiteral: return e.value;
      case K::kName: {
        if (const Value* v = scope.find(e.name)) return *v;
        if (is_global_function(e.name)) {
          return err(e.line, "the function " + e.name + " used as a value (call it)");
        }
        return Value::undefined("'" + e.name + "' is undefined");
      }
      case K::kList: {
        List l;
        for (const auto& x : e.args) {
          auto v = eval(*x, scope);
          if (!v.is_ok()) return v.status();
          l.push_back(std::move(*v));
        }
        Value v = e.name == "tuple" ? Value::tuple(std::move(l)) : Value(std::move(l));
        if (v.depth() > kMaxValueDepth)
          return err(e.line, "a list nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
        return v;
      }
      case K::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          auto k = eval(*e.args[i], scope);
          if (!k.is_ok()) return k.status();
          if (!k->is_string()) return err(e.line, "dict keys must be strings here, not a " + k->type_name());
          auto v = eval(*e.args[i + 1], scope);
          if (!v.is_ok()) return v.status();
          d.set(k->as_string(), std::move(*v));
        }
        Value v(std::move(d));
        if (v.depth() > kMaxValueDepth)
          return err(e.line, "a dict nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
        return v;
      }
      case K::kAttr: {
        auto obj = eval(*e.args[0], scope);
        if (!obj.is_ok()) return obj.status();
        return member(*obj, Value(e.name), e.line);
      }
      case K::kIndex: {
        auto obj = eval(*e.args[0], scope);
        if (!obj.is_ok()) return obj.status();
        auto key = eval(*e.args[1], scope);
        if (!key.is_ok()) return key.status();
        return member(*obj, *key, e.line);
      }
      case K::kSlice: return slice(e, scope);
      case K::kCall: return call(e, scope);
      case K::kFilter: {
        auto x = eval(*e.args[0], scope);
        if (!x.is_ok()) return x.status();
        auto a = args_of(e, 1, scope);
        if (!a.is_ok()) return a.status();
        // Most filters walk their input (unique compares every pair); a few only look at it.
        static const std::set<std::string> kLooks = {"length", "count", "first", "last", "default", "d",
                                                     "attr",   "safe",  "abs",   "int",  "float"};
        const uint64_t n = x->is_list() ? x->as_list().size() : 0;
        const uint64_t walk = kLooks.count(e.name) ? 1 : x->weight();
        TUNABLEOP_RETURN_IF_ERROR(charge(e.name == "unique" ? walk + n * n / 16 : walk, e.line));
        auto r = apply_filter(e.name, *x, *a);
        if (!r.is_ok()) return at(e.line, r.status());
        return r;
      }
      case K::kTest: {
        // "f is defined" for a global function: defined (Llama 3.2 asks about strftime_now).
        bool result;
        if ((e.name == "defined" || e.name == "undefined") && e.args[0]->kind == K::kName &&
            !scope.find(e.args[0]->name) && is_global_function(e.args[0]->name)) {
          result = e.name == "defined";
        } else {
          auto x = eval(*e.args[0], scope);
          if (!x.is_ok()) return x.status();
          auto a = args_of(e, 1, scope);
          if (!a.is_ok()) return a.status();
          // The tests that compare or search walk their operands; the rest look at a type.
          static const std::set<std::string> kWalks = {"in", "eq", "equalto", "==", "ne", "!="};
          if (kWalks.count(e.name))
            TUNABLEOP_RETURN_IF_ERROR(charge(x->weight() + (a->pos.empty() ? 0 : a->pos[0].weight()), e.line));
          auto r = apply_test(e.name, *x, *a);
          if (!r.is_ok()) return at(e.line, r.status());
          result = *r;
        }
        return Value(result != e.negated);
      }
      case K::kNot: {
        auto x = eval(*e.args[0], scope);
        if (!x.is_ok()) return x.status();
        return Value(!x->truthy());
      }
      case K::kNeg:
      case K::kPos: {
        auto x = eval(*e.args[0], scope);
        if (!x.is_ok()) return x.status();
        if (!x->is_number())
          return err(e.line,
                     "bad operand for unary " + std::string(e.kind == K::kNeg ? "-" : "+") + ": " + describe(*x));
        if (e.kind == K::kPos) return x->kind() == Value::Kind::kBool ? Value(x->as_int()) : *x;
        if (x->kind() == Value::Kind::kFloat) return Value(-x->as_float());
        if (x->as_int() == INT64_MIN) return err(e.line, "integer overflow");
        return Value(-x->as_int());
      }
      case K::kAnd:
      case K::kOr: {  // Python's: the deciding operand's value
        auto a = eval(*e.args[0], scope);
        if (!a.is_ok()) return a.status();
        if (a->truthy() == (e.kind == K::kOr)) return a;
        return eval(*e.args[1], scope);
      }
      case K::kCondition: {
        auto c = eval(*e.args[1], scope);
        if (!c.is_ok()) return c.status();
        if (c->truthy()) return eval(*e.args[0], scope);
        if (!e.args[2]) return Value::undefined("the if expression has no else branch");
        return eval(*e.args[2], scope);
      }
      case K::kBinary: return binary(e, scope);
    }
    return err(e.line, "unknown expression");
  }

  static std::string describe(const Value& v) {
    return v.is_undefined() ? "an undefined value (" + v.as_string() + ")" : "'" + v.type_name() + "'";
  }

  // a.b and a[b]: a dict's key (a namespace's attribute), a list's or string's index; missing
  // gives Undefined; anything of Undefined is an error, as in Jinja.
  StatusOr<Value> member(const Value& obj, const Value& key, int line) {
    if (obj.is_undefined()) {
      return err(line, obj.as_string() + " (looking up " + utf8::excerpt(key.repr(), 40) + " in it)");
    }
    if (obj.is_dict()) {
      if (key.is_string()) {
        if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
      }
      return Value::undefined("'dict object' has no attribute " + utf8::excerpt(key.repr(), 40));
    }
    if ((obj.is_list() || obj.is_string()) && (key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool)) {
      if (obj.is_list()) {
        const int64_t n = int64_t(obj.as_list().size());
        const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
        if (i < 0 || i >= n) return Value::undefined("list index " + std::to_string(key.as_int()) + " is out of range");
        return obj.as_list()[size_t(i)];
      }
      const auto cps = utf8::code_points(obj.as_string());
      const int64_t n = int64_t(cps.size());
      const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
      if (i < 0 || i >= n) return Value::undefined("string index " + std::to_string(key.as_int()) + " is out of range");
      return Value(utf8::from_code_points(cps, size_t(i), size_t(i) + 1));
    }
    return Value::undefined("'" + obj.type_name() + " object' has no attribute " + utf8::excerpt(key.repr(), 40));
  }

  StatusOr<Value> slice(const Expr& e, Scope& scope) {
    auto obj = eval(*e.args[0], scope);
    if (!obj.is_ok()) return obj.status();
    Value parts[3];
    const Value* ptr[3] = {nullptr, nullptr, nullptr};
    for (int i = 0; i < 3; ++i) {
      if (!e.args[size_t(i) + 1]) continue;
      auto v = eval(*e.args[size_t(i) + 1], scope);
      if (!v.is_ok()) return v.status();
      parts[i] = std::move(*v);
      ptr[i] = &parts[i];
    }
    if (obj->is_list()) {
      auto picks = slice_picks(obj->as_list().size(), ptr[0], ptr[1], ptr[2]);
      if (!picks.is_ok()) return at(e.line, picks.status());
      List out;
      for (size_t i : *picks) out.push_back(obj->as_list()[i]);
      return Value(std::move(out));
    }
    if (obj->is_string()) {
      const auto cps = utf8::code_points(obj->as_string());
      auto picks = slice_picks(cps.size(), ptr[0], ptr[1], ptr[2]);
      if (!picks.is_ok()) return at(e.line, picks.status());
      std::string out;
      for (size_t i : *picks) utf8::append(out, cps[i]);
      return Value(out);
    }
    return err(e.line, "cannot slice " + describe(*obj));
  }

  StatusOr<Value> call(const Expr& e, Scope& scope) {
    const Expr& callee = *e.args[0];
    auto a = args_of(e, 1, scope);
    if (!a.is_ok()) return a.status();
    if (callee.kind == Expr::Kind::kName && !scope.find(callee.name)) {
      if (callee.name == "raise_exception") {
        const std::string msg = a->pos.empty() ? std::string("(no message)") : a->pos[0].str();
        return Status::invalid_argument(name_ + ":" + std::to_string(e.line) +
                                        ": the template refused the conversation: " + utf8::excerpt(msg, 400));
      }
      if (is_global_function(callee.name)) {
        auto r = call_global(callee.name, *a);
        if (!r.is_ok()) return at(e.line, r.status());
        return r;
      }
      return Status::unsupported(name_ + ":" + std::to_string(e.line) + ": unsupported function " +
                                 utf8::excerpt(callee.name, 40) + "()");
    }
    if (callee.kind == Expr::Kind::kAttr) {
      auto obj = eval(*callee.args[0], scope);
      if (!obj.is_ok()) return obj.status();
      if (obj->is_dict() && obj->as_dict().find(callee.name) && obj->kind() != Value::Kind::kNamespace) {
        // A key shadows nothing here: dict methods win, as in Python (message.items()).
        const Value* v = obj->as_dict().find(callee.name);
        if (callee.name != "items" && callee.name != "keys" && callee.name != "values" && callee.name != "get") {
          return err(e.line, "'" + callee.name + "' is a " + v->type_name() + ", not callable");
        }
      }
      TUNABLEOP_RETURN_IF_ERROR(charge(obj->weight(), e.line));
      auto r = call_method(*obj, callee.name, *a);
      if (!r.is_ok()) return at(e.line, r.status());
      return r;
    }
    return err(e.line, "only functions and methods can be called here");
  }

  StatusOr<Value> binary(const Expr& e, Scope& scope) {
    auto av = eval(*e.args[0], scope);
    if (!av.is_ok()) return av.status();
    auto bv = eval(*e.args[1], scope);
    if (!bv.is_ok()) return bv.status();
    const Value& a = *av;
    const Value& b = *bv;
    const std::string& op = e.name;
    TUNABLEOP_RETURN_IF_ERROR(charge(a.weight() + b.weight(), e.line));  // compared, searched or printed
    using K = Value::Kind;
    if (op == "~") {
      std::string s = a.str() + b.str();
      if (s.size() > kMaxOutputBytes)
        return Status::resource_exhausted(name_ + ":" + std::to_string(e.line) + ": a string passes 64 MiB");
      return Value(std::move(s));
    }
    if (op == "==") return Value(a.equals(b));
    if (op == "!=") return Value(!a.equals(b));
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.is_string()) {
        if (!a.is_string()) return err(e.line, "'in <string>' needs a string on the left, not " + describe(a));
        found = b.as_string().find(a.as_string()) != std::string::npos;
      } else if (b.is_list()) {
        for (const Value& v : b.as_list()) found = found || v.equals(a);
      } else if (b.is_dict()) {
        found = a.is_string() && b.as_dict().find(a.as_string());
      } else if (!b.is_undefined()) {
        return err(e.line, "'in' needs a string, list or dict on the right, not " + describe(b));
      }
      return Value(found == (op == "in"));
    }
    if (a.is_undefined() || b.is_undefined()) {
      return err(e.line, (a.is_undefined() ? a : b).as_string() + " (in '" + op + "')");
    }
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      int cmp;
      if (a.is_number() && b.is_number()) {
        cmp = a.as_float() < b.as_float() ? -1 : a.as_float() > b.as_float() ? 1 : 0;
      } else if (a.is_string() && b.is_string()) {
        cmp = a.as_string().compare(b.as_string());
      } else {
        return err(e.line, "'" + op + "' not supported between " + describe(a) + " and " + describe(b));
      }
      const bool r = op == "<" ? cmp < 0 : op == "<=" ? cmp <= 0 : op == ">" ? cmp > 0 : cmp >= 0;
      return Value(r);
    }
    if (op == "+" && a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > kMaxOutputBytes) {
        return Status::resource_exhausted(name_ + ":" + std::to_string(e.line) + ": a string passes 64 MiB");
      }
      return Value(a.as_string() + b.as_string());
    }
    if (op == "+" && a.is_list() && b.is_list()) {
      if (a.as_list().size() + b.as_list().size() > kMaxListItems)
        return Status::resource_exhausted(name_ + ":" + std::to_string(e.line) + ": a list passes " +
                                          std::to_string(kMaxListItems) + " items");
      List l = a.as_list();
      l.insert(l.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(l));
    }
    if (op == "*" && ((a.is_string() || a.is_list()) != (b.is_string() || b.is_list())) &&
        (a.kind() == K::kInt || b.kind() == K::kInt)) {
      const Value& seq = a.kind() == K::kInt ? b : a;
      const int64_t n = std::max<int64_t>(0, (a.kind() == K::kInt ? a : b).as_int());
      const size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().size();
      if (unit && uint64_t(n) > kMaxOutputBytes / unit) {
        return Status::resource_exhausted(name_ + ":" + std::to_string(e.line) + ": a repetition passes 64 MiB");
      }
      if (seq.is_list() && unit && uint64_t(n) > kMaxListItems / unit) {
        return Status::resource_exhausted(name_ + ":" + std::to_string(e.line) + ": a repetition passes " +
                                          std::to_string(kMaxListItems) + " items");
      }
      if (seq.is_string()) {  // by doubling: 'x' * 60000000 is 26 appends, not 60 million
        const size_t total = unit * size_t(n);
        std::string s = total ? seq.as_string() : std::string();
        s.reserve(total);
        while (!s.empty() && s.size() * 2 <= total) s += s;
        s.append(s, 0, total - s.size());
        return Value(std::move(s));
      }
      List l;
      for (int64_t i = 0; i < n; ++i) l.insert(l.end(), seq.as_list().begin(), seq.as_list().end());
      return Value(std::move(l));
    }
    if (!a.is_number() || !b.is_number()) {
      return err(e.line, "unsupported operand types for " + op + ": " + describe(a) + " and " + describe(b));
    }
    const bool floats = a.kind() == K::kFloat || b.kind() == K::kFloat;
    if (op == "/") {
      if (b.as_float() == 0) return err(e.line, "division by zero");
      return Value(a.as_float() / b.as_float());
    }
    if (floats) {
      const double x = a.as_float(), y = b.as_float();
      if ((op == "//" || op == "%") && y == 0) return err(e.line, "division by zero");
      if (op == "+") return Value(x + y);
      if (op == "-") return Value(x - y);
      if (op == "*") return Value(x * y);
      if (op == "//") return Value(std::floor(x / y));
      if (op == "%") {
        double r = std::fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value(r);
      }
      if (op == "**") return Value(std::pow(x, y));
    } else {
      const int64_t x = a.as_int(), y = b.as_int();
      int64_t r = 0;
      bool overflow = false;
      if (op == "+") {
        overflow = __builtin_add_overflow(x, y, &r);
      } else if (op == "-") {
        overflow = __builtin_sub_overflow(x, y, &r);
      } else if (op == "*") {
        overflow = __builtin_mul_overflow(x, y, &r);
      } else if (op == "//" || op == "%") {
        if (y == 0) return err(e.line, "division by zero");
        if (x == INT64_MIN && y == -1) return err(e.line, "integer overflow");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
        r = op == "//" ? q : m;
      } else if (op == "**") {
        if (y < 0) return Value(std::pow(double(x), double(y)));
        if (x == 0 || x == 1) return Value(y == 0 ? int64_t(1) : x);
        if (x == -1) return Value(y % 2 ? int64_t(-1) : int64_t(1));
        r = 1;  // |x| >= 2: overflows within 64 steps
        for (int64_t i = 0; i < y && !overflow; ++i) overflow = __builtin_mul_overflow(r, x, &r);
      }
      if (overflow) return err(e.line, "integer overflow in '" + op + "' (past 64 bits)");
      return Value(r);
    }
    return err(e.line, "unknown operator " + op);
  }

  const std::string& name_;
  std::string& out_;
  int loops_ = 0;
  uint64_t work_ = 0;
};

}  // namespace

StatusOr<Template> Template::parse(std::string_view source, const std::string& name) {
  // Python reads a template as UTF-8 text and fails on anything else; so do we, before the
  // string functions see it.
  if (const size_t bad = utf8::first_invalid(source); bad != std::string_view::npos)
    return Status::parse_error(name + ": not valid UTF-8 (the byte at offset " + std::to_string(bad) + ")");
  auto body = parse_template(source, name);
  if (!body.is_ok()) return body.status();
  Template t;
  t.body_ = std::move(*body);
  t.name_ = name;
  return t;
}

StatusOr<std::string> Template::render(const Dict& context) const {
  Scope globals;
  for (const auto& [k, v] : context.items) globals.vars[k] = v;
  std::string out;
  Renderer r(name_, out);
  Flow flow = Flow::kNormal;
  TUNABLEOP_RETURN_IF_ERROR(r.body(*body_, globals, flow));
  return out;
}

}  // namespace tunableop::llm::jinja
