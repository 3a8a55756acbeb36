#include "llm/text/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "llm/text/utf8.h"

namespace tunableop::llm::jinja {

const Value* Args::get(size_t i, const char* name) const {
  if (i < pos.size()) return &pos[i];
  for (const auto& [k, v] : kw) {
    if (k == name) return &v;
  }
  return nullptr;
}

namespace {

Status type_error(const std::string& what, const Value& v) {
  if (v.is_undefined()) return Status::invalid_argument(what + ": " + v.as_string());
  return Status::invalid_argument(what + ": not supported on a " + v.type_name());
}

bool is_py_space(uint32_t cp) { return utf8::is_white_space(cp) || (cp >= 0x1C && cp <= 0x1F); }

std::string ascii_map(const std::string& s, int (*f)(int)) {
  std::string out = s;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x80) c = char(f(c));
  }
  return out;
}
int to_upper(int c) { return (c >= 'a' && c <= 'z') ? c - 32 : c; }
int to_lower(int c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

std::string capitalize(const std::string& s) {
  std::string out = ascii_map(s, to_lower);
  if (!out.empty()) out[0] = char(to_upper(out[0]));
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool in_word = false;
  for (char& c : out) {
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alpha) c = char(in_word ? to_lower(c) : to_upper(c));
    in_word = alpha || static_cast<unsigned char>(c) >= 0x80;
  }
  return out;
}

StatusOr<std::string> need_string(const Value& v, const std::string& what) {
  if (!v.is_string()) return type_error(what, v);
  return v.as_string();
}

// Python's str.split.
List split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right) {
  List out;
  if (!sep || sep->is_none()) {  // runs of white space, no empty strings
    const auto cps = utf8::code_points(s);
    std::vector<std::pair<size_t, size_t>> words;
    for (size_t i = 0; i < cps.size();) {
      while (i < cps.size() && is_py_space(cps[i])) ++i;
      size_t j = i;
      while (j < cps.size() && !is_py_space(cps[j])) ++j;
      if (j > i) words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit >= 0 && int64_t(words.size()) > maxsplit + 1) {
      if (from_right) {
        const size_t keep = words.size() - size_t(maxsplit) - 1;
        words[keep].first = words[0].first;
        words.erase(words.begin(), words.begin() + ptrdiff_t(keep));
      } else {
        words[size_t(maxsplit)].second = words.back().second;
        words.resize(size_t(maxsplit) + 1);
      }
    }
    for (const auto& [b, e] : words) out.emplace_back(utf8::from_code_points(cps, b, e));
    return out;
  }
  const std::string& d = sep->as_string();
  std::vector<std::string> parts;
  if (!from_right) {
    size_t at = 0;
    for (size_t hit;
         (maxsplit < 0 || int64_t(parts.size()) < maxsplit) && (hit = s.find(d, at)) != std::string::npos;) {
      parts.push_back(s.substr(at, hit - at));
      at = hit + d.size();
    }
    parts.push_back(s.substr(at));
  } else {
    size_t end = s.size();
    for (size_t hit; (maxsplit < 0 || int64_t(parts.size()) < maxsplit) && end >= d.size() &&
                     (hit = s.rfind(d, end - d.size())) != std::string::npos;) {
      parts.push_back(s.substr(hit + d.size(), end - hit - d.size()));
      end = hit;
    }
    parts.push_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
  }
  for (auto& p : parts) out.emplace_back(std::move(p));
  return out;
}

List items_of(const Value& d) {
  List out;
  for (const auto& [k, v] : d.as_dict().items) out.push_back(Value::tuple(List{Value(k), v}));
  return out;
}

// What iterating a value gives (for filters): list items, dict keys, string characters.
StatusOr<List> iterate(const Value& v, const std::string& what) {
  switch (v.kind()) {
    case Value::Kind::kList: return v.as_list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& kv : v.as_dict().items) keys.emplace_back(kv.first);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      const auto cps = utf8::code_points(v.as_string());
      for (size_t i = 0; i < cps.size(); ++i) chars.emplace_back(utf8::from_code_points(cps, i, i + 1));
      return chars;
    }
    case Value::Kind::kUndefined: return List{};
    default: return type_error(what + " (iterating)", v);
  }
}

// "a.b" attribute paths of selectattr/map/sort.
Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t dot = path.find('.', at);
    const std::string part = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    if (!cur.is_dict()) return Value::undefined("'" + cur.type_name() + " object' has no attribute '" + part + "'");
    const Value* next = cur.as_dict().find(part);
    if (!next) return Value::undefined("'dict object' has no attribute '" + part + "'");
    cur = *next;
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  return cur;
}

// Jinja's sort order: numbers by value, strings case-insensitively unless asked.
StatusOr<bool> less(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_number() && b.is_number()) return a.as_float() < b.as_float();
  if (a.is_string() && b.is_string()) {
    return case_sensitive ? a.as_string() < b.as_string()
                          : ascii_map(a.as_string(), to_lower) < ascii_map(b.as_string(), to_lower);
  }
  return Status::invalid_argument("cannot order a " + a.type_name() + " and a " + b.type_name());
}

StatusOr<Value> select_like(const std::string& name, const Value& x, const Args& args) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep_if = name == "select" || name == "selectattr";
  auto items = iterate(x, name);
  if (!items.is_ok()) return items.status();
  size_t first = 0;
  std::string attr;
  if (by_attr) {
    if (args.pos.empty() || !args.pos[0].is_string())
      return Status::invalid_argument(name + ": needs an attribute name");
    attr = args.pos[0].as_string();
    first = 1;
  }
  std::string test;
  Args test_args;
  if (args.pos.size() > first) {
    if (!args.pos[first].is_string()) return Status::invalid_argument(name + ": the test must be named by a string");
    test = args.pos[first].as_string();
    test_args.pos.assign(args.pos.begin() + ptrdiff_t(first) + 1, args.pos.end());
  }
  List out;
  for (const Value& item : *items) {
    const Value subject = by_attr ? attribute_path(item, attr) : item;
    bool pass;
    if (test.empty()) {
      pass = subject.truthy();
    } else {
      auto t = apply_test(test, subject, test_args);
      if (!t.is_ok()) return t.status();
      pass = *t;
    }
    if (pass == keep_if) out.push_back(item);
  }
  return Value(std::move(out));
}

StatusOr<Value> number_of(const Value& x, bool as_float, const Value* fallback) {
  if (x.is_number())
    return as_float ? Value(x.as_float())
                    : Value(int64_t(x.kind() == Value::Kind::kFloat ? std::trunc(x.as_float()) : double(x.as_int())));
  if (x.is_string()) {
    const std::string s = strip(x.as_string(), nullptr, true, true);
    char* end = nullptr;
    errno = 0;
    if (as_float) {
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value(d);
    } else {
      const long long v = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value(int64_t(v));
    }
  }
  if (fallback) return *fallback;
  return as_float ? Value(0.0) : Value(int64_t(0));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  const auto cps = utf8::code_points(s);
  std::vector<uint32_t> set;
  const bool white = !chars || chars->is_none();
  if (!white) set = utf8::code_points(chars->as_string());
  auto strippable = [&](uint32_t c) {
    return white ? is_py_space(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cps.size();
  while (left && b < e && strippable(cps[b])) ++b;
  while (right && e > b && strippable(cps[e - 1])) --e;
  return utf8::from_code_points(cps, b, e);
}

StatusOr<Value> apply_filter(const std::string& name, const Value& x, const Args& args) {
  if (name == "trim") {
    const Value* chars = args.get(0, "chars");
    if (chars && !chars->is_none() && !chars->is_string())
      return Status::invalid_argument("trim: chars must be a string");
    return Value(strip(x.str(), chars, true, true));
  }
  if (name == "length" || name == "count") {
    switch (x.kind()) {
      case Value::Kind::kUndefined: return Value(int64_t(0));
      case Value::Kind::kString: return Value(int64_t(utf8::code_points(x.as_string()).size()));
      case Value::Kind::kList: return Value(int64_t(x.as_list().size()));
      case Value::Kind::kDict: return Value(int64_t(x.as_dict().items.size()));
      default: return type_error("length", x);
    }
  }
  if (name == "upper") return Value(ascii_map(x.str(), to_upper));
  if (name == "lower") return Value(ascii_map(x.str(), to_lower));
  if (name == "capitalize") return Value(capitalize(x.str()));
  if (name == "title") return Value(title(x.str()));
  if (name == "string") return Value(x.str());
  if (name == "safe") return x;
  if (name == "escape" || name == "e") return Value(html_escape(x.str()));
  if (name == "default" || name == "d") {
    const Value* fallback = args.get(0, "default_value");
    const Value* boolean = args.get(1, "boolean");
    const bool use = x.is_undefined() || (boolean && boolean->truthy() && !x.truthy());
    return use ? (fallback ? *fallback : Value("")) : x;
  }
  if (name == "tojson") {
    const Value* indent = args.get(0, "indent");
    const Value* sort_keys = args.get(3, "sort_keys");
    const Value* ensure_ascii = args.get(1, "ensure_ascii");
    if (ensure_ascii && ensure_ascii->truthy())
      return Status::unsupported("tojson(ensure_ascii=true) is not supported");
    if (args.get(2, "separators")) return Status::unsupported("tojson(separators=...) is not supported");
    if (indent && !indent->is_none() && indent->kind() != Value::Kind::kInt) {
      return Status::invalid_argument("tojson: indent must be an integer");
    }
    auto s = x.to_json(indent && !indent->is_none() ? int(std::clamp<int64_t>(indent->as_int(), 0, 64)) : -1,
                       sort_keys && sort_keys->truthy());
    if (!s.is_ok()) return s.status();
    return Value(*s);
  }
  if (name == "join") {
    auto items = iterate(x, "join");
    if (!items.is_ok()) return items.status();
    const Value* sep = args.get(0, "d");
    const Value* attr = args.get(1, "attribute");
    std::string out;
    for (size_t i = 0; i < items->size(); ++i) {
      if (i && sep) out += sep->str();
      out += (attr ? attribute_path((*items)[i], attr->str()) : (*items)[i]).str();
    }
    return Value(out);
  }
  if (name == "list") {
    auto items = iterate(x, "list");
    if (!items.is_ok()) return items.status();
    return Value(std::move(*items));
  }
  if (name == "first" || name == "last") {
    auto items = iterate(x, name);
    if (!items.is_ok()) return items.status();
    if (items->empty()) return Value::undefined("no " + name + " item: the sequence is empty");
    return name == "first" ? items->front() : items->back();
  }
  if (name == "items") {
    if (x.is_undefined()) return Value(List{});
    if (!x.is_dict()) return type_error("items", x);
    return Value(items_of(x));
  }
  if (name == "dictsort") {
    if (!x.is_dict()) return type_error("dictsort", x);
    List items = items_of(x);
    const Value* cs = args.get(0, "case_sensitive");
    const Value* by = args.get(1, "by");
    const Value* reverse = args.get(2, "reverse");
    const size_t k = by && by->str() == "value" ? 1 : 0;
    Status st;
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      auto l = less(a.as_list()[k], b.as_list()[k], cs && cs->truthy());
      if (!l.is_ok()) st = l.status();
      return l.is_ok() && *l;
    });
    TUNABLEOP_RETURN_IF_ERROR(st);
    if (reverse && reverse->truthy()) std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    return select_like(name, x, args);
  }
  if (name == "map") {
    auto items = iterate(x, "map");
    if (!items.is_ok()) return items.status();
    List out;
    if (const Value* attr = args.get(99, "attribute")) {
      const Value* fallback = args.get(99, "default");
      for (const Value& item : *items) {
        Value v = attribute_path(item, attr->str());
        out.push_back(v.is_undefined() && fallback ? *fallback : v);
      }
      return Value(std::move(out));
    }
    if (args.pos.empty() || !args.pos[0].is_string()) {
      return Status::invalid_argument("map: needs a filter name or attribute=");
    }
    Args rest;
    rest.pos.assign(args.pos.begin() + 1, args.pos.end());
    rest.kw = args.kw;
    for (const Value& item : *items) {
      auto v = apply_filter(args.pos[0].as_string(), item, rest);
      if (!v.is_ok()) return v.status();
      out.push_back(std::move(*v));
    }
    return Value(std::move(out));
  }
  if (name == "reverse") {
    if (x.is_string()) {
      auto cps = utf8::code_points(x.as_string());
      std::reverse(cps.begin(), cps.end());
      return Value(utf8::from_code_points(cps, 0, cps.size()));
    }
    auto items = iterate(x, "reverse");
    if (!items.is_ok()) return items.status();
    std::reverse(items->begin(), items->end());
    return Value(std::move(*items));
  }
  if (name == "sort" || name == "unique" || name == "min" || name == "max") {
    auto items = iterate(x, name);
    if (!items.is_ok()) return items.status();
    const bool sort = name == "sort";
    const Value* reverse = sort ? args.get(0, "reverse") : nullptr;
    const Value* cs = args.get(sort ? 1 : 0, "case_sensitive");
    const Value* attr = args.get(sort ? 2 : 1, "attribute");
    auto key = [&](const Value& v) { return attr ? attribute_path(v, attr->str()) : v; };
    if (name == "unique") {
      List out;
      for (const Value& v : *items) {
        bool seen = false;
        for (const Value& w : out) seen = seen || key(w).equals(key(v));
        if (!seen) out.push_back(v);
      }
      return Value(std::move(out));
    }
    Status st;
    auto cmp = [&](const Value& a, const Value& b) {
      auto l = less(key(a), key(b), cs && cs->truthy());
      if (!l.is_ok()) st = l.status();
      return l.is_ok() && *l;
    };
    if (sort) {
      std::stable_sort(items->begin(), items->end(), cmp);
      TUNABLEOP_RETURN_IF_ERROR(st);
      if (reverse && reverse->truthy()) std::reverse(items->begin(), items->end());
      return Value(std::move(*items));
    }
    if (items->empty()) return Value::undefined("no " + name + ": the sequence is empty");
    auto it = name == "min" ? std::min_element(items->begin(), items->end(), cmp)
                            : std::max_element(items->begin(), items->end(), cmp);
    TUNABLEOP_RETURN_IF_ERROR(st);
    return *it;
  }
  if (name == "sum") {
    auto items = iterate(x, "sum");
    if (!items.is_ok()) return items.status();
    const Value* attr = args.get(0, "attribute");
    const Value* start = args.get(1, "start");
    bool is_float = start && start->kind() == Value::Kind::kFloat;
    int64_t i = start ? start->as_int() : 0;
    double f = start ? start->as_float() : 0;
    for (const Value& item : *items) {
      const Value v = attr ? attribute_path(item, attr->str()) : item;
      if (!v.is_number()) return type_error("sum", v);
      is_float = is_float || v.kind() == Value::Kind::kFloat;
      i += v.as_int(), f += v.as_float();
    }
    return is_float ? Value(f) : Value(i);
  }
  if (name == "abs") {
    if (!x.is_number()) return type_error("abs", x);
    return x.kind() == Value::Kind::kFloat ? Value(std::fabs(x.as_float())) : Value(int64_t(std::llabs(x.as_int())));
  }
  if (name == "round") {
    if (!x.is_number()) return type_error("round", x);
    const Value* precision = args.get(0, "precision");
    const Value* method = args.get(1, "method");
    const double scale = std::pow(10.0, double(precision ? precision->as_int() : 0));
    const std::string m = method ? method->str() : "common";
    const double v = x.as_float() * scale;
    const double r = m == "floor" ? std::floor(v) : m == "ceil" ? std::ceil(v) : std::round(v);
    return Value(r / scale);
  }
  if (name == "int") return number_of(x, false, args.get(0, "default"));
  if (name == "float") return number_of(x, true, args.get(0, "default"));
  if (name == "replace") {
    const Value* old = args.get(0, "old");
    const Value* with = args.get(1, "new");
    const Value* count = args.get(2, "count");
    if (!old || !with) return Status::invalid_argument("replace: needs the old and new strings");
    return call_method(Value(x.str()), "replace",
                       Args{{*old, *with},
                            count ? std::vector<std::pair<std::string, Value>>{{"count", *count}}
                                  : std::vector<std::pair<std::string, Value>>{}});
  }
  if (name == "indent") {
    const Value* width = args.get(0, "width");
    const Value* first = args.get(1, "first");
    const Value* blank = args.get(2, "blank");
    const std::string pad = width && width->is_string()
                                ? width->as_string()
                                : std::string(size_t(width ? std::clamp<int64_t>(width->as_int(), 0, 256) : 4), ' ');
    const std::string s = x.str();
    std::string out;
    size_t at = 0;
    bool first_line = true;
    while (at <= s.size()) {
      const size_t nl = s.find('\n', at);
      const std::string line = s.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
      const bool indent_it = first_line ? (first && first->truthy()) : (!line.empty() || (blank && blank->truthy()));
      out += (indent_it ? pad : "") + line;
      if (nl == std::string::npos) break;
      out += '\n';
      at = nl + 1;
      first_line = false;
    }
    return Value(out);
  }
  if (name == "wordcount") return Value(int64_t(split(x.str(), nullptr, -1, false).size()));
  if (name == "attr") {
    const Value* attr = args.get(0, "name");
    if (!attr) return Status::invalid_argument("attr: needs a name");
    return attribute_path(x, attr->str());
  }
  return Status::unsupported("unsupported filter '" + utf8::excerpt(name, 40) + "'");
}

StatusOr<bool> apply_test(const std::string& name, const Value& x, const Args& args) {
  const Value* arg = args.get(0, "other");
  auto need_arg = [&]() -> Status {
    return arg ? Status::ok() : Status::invalid_argument("the test '" + name + "' needs an argument");
  };
  using K = Value::Kind;
  if (name == "defined") return !x.is_undefined();
  if (name == "undefined") return x.is_undefined();
  if (name == "none") return x.is_none();
  if (name == "boolean") return x.kind() == K::kBool;
  if (name == "true") return x.kind() == K::kBool && x.as_bool();
  if (name == "false") return x.kind() == K::kBool && !x.as_bool();
  if (name == "integer") return x.kind() == K::kInt;
  if (name == "float") return x.kind() == K::kFloat;
  if (name == "number") return x.is_number();
  if (name == "string") return x.is_string();
  if (name == "mapping") return x.kind() == K::kDict;
  if (name == "iterable") return x.is_list() || x.kind() == K::kDict || x.is_string() || x.is_undefined();
  if (name == "sequence") return x.is_list() || x.kind() == K::kDict || x.is_string();
  if (name == "callable") return false;
  if (name == "escaped") return false;
  if (name == "lower") return x.is_string() && ascii_map(x.as_string(), to_lower) == x.as_string();
  if (name == "upper") return x.is_string() && ascii_map(x.as_string(), to_upper) == x.as_string();
  if (name == "odd" || name == "even") {
    if (x.kind() != K::kInt && x.kind() != K::kBool) return type_error("the test '" + name + "'", x);
    return (((x.as_int() % 2) + 2) % 2 == 1) == (name == "odd");
  }
  if (name == "divisibleby") {
    TUNABLEOP_RETURN_IF_ERROR(need_arg());
    if (!x.is_number() || !arg->is_number() || arg->as_int() == 0) return type_error("divisibleby", x);
    return x.as_int() % arg->as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") {
    TUNABLEOP_RETURN_IF_ERROR(need_arg());
    return x.equals(*arg);
  }
  if (name == "ne" || name == "!=") {
    TUNABLEOP_RETURN_IF_ERROR(need_arg());
    return !x.equals(*arg);
  }
  if (name == "sameas") {
    TUNABLEOP_RETURN_IF_ERROR(need_arg());
    if (x.kind() != arg->kind()) return false;
    return x.is_none() || x.is_undefined() || ((x.kind() == K::kBool || x.kind() == K::kInt) && x.equals(*arg));
  }
  for (const auto& [op, names] : std::vector<std::pair<int, std::vector<std::string>>>{
           {0, {"lt", "lessthan", "<"}}, {1, {"le", "<="}}, {2, {"gt", "greaterthan", ">"}}, {3, {"ge", ">="}}}) {
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    TUNABLEOP_RETURN_IF_ERROR(need_arg());
    auto a = less(x, *arg, true), b = less(*arg, x, true);
    if (!a.is_ok()) return a.status();
    if (!b.is_ok()) return b.status();
    switch (op) {
      case 0: return *a;
      case 1: return !*b;
      case 2: return *b;
      default: return !*a;
    }
  }
  if (name == "in") {
    TUNABLEOP_RETURN_IF_ERROR(need_arg());
    if (arg->is_string() && x.is_string()) return arg->as_string().find(x.as_string()) != std::string::npos;
    if (arg->is_list()) {
      for (const Value& v : arg->as_list()) {
        if (v.equals(x)) return true;
      }
      return false;
    }
    if (arg->kind() == K::kDict) return x.is_string() && arg->as_dict().find(x.as_string()) != nullptr;
    return type_error("the test 'in'", *arg);
  }
  return Status::unsupported("unsupported test '" + utf8::excerpt(name, 40) + "'");
}

StatusOr<Value> call_method(const Value& obj, const std::string& name, const Args& args) {
  if (obj.kind() == Value::Kind::kDict) {
    if (name == "items") return Value(items_of(obj));
    if (name == "keys" || name == "values") {
      List out;
      for (const auto& [k, v] : obj.as_dict().items) out.push_back(name == "keys" ? Value(k) : v);
      return Value(std::move(out));
    }
    if (name == "get") {
      const Value* key = args.get(0, "key");
      const Value* fallback = args.get(1, "default");
      if (!key) return Status::invalid_argument("dict.get: needs a key");
      const Value* v = key->is_string() ? obj.as_dict().find(key->as_string()) : nullptr;
      return v ? *v : (fallback ? *fallback : Value::none());
    }
    return Status::unsupported("unsupported method dict." + utf8::excerpt(name, 40) + "()");
  }
  if (!obj.is_string()) {
    if (obj.is_undefined()) return Status::invalid_argument(obj.as_string() + " (calling ." + name + "())");
    return Status::unsupported("unsupported method " + obj.type_name() + "." + utf8::excerpt(name, 40) + "()");
  }
  const std::string& s = obj.as_string();
  const Value* a0 = args.get(0, "");
  auto string_arg = [&](const char* what) -> StatusOr<std::string> {
    if (!a0) return Status::invalid_argument(std::string("str.") + name + ": needs " + what);
    return need_string(*a0, "str." + name);
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    if (a0 && !a0->is_none() && !a0->is_string())
      return Status::invalid_argument("str." + name + ": chars must be a string");
    return Value(strip(s, a0, name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith" || name == "endswith") {
    if (!a0) return Status::invalid_argument("str." + name + ": needs a prefix");
    List options = a0->is_list() ? a0->as_list() : List{*a0};
    for (const Value& o : options) {
      if (!o.is_string()) return type_error("str." + name, o);
      const std::string& p = o.as_string();
      if (p.size() <= s.size() &&
          (name == "startswith" ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0)) {
        return Value(true);
      }
    }
    return Value(false);
  }
  if (name == "split" || name == "rsplit") {
    const Value* sep = args.get(0, "sep");
    const Value* maxsplit = args.get(1, "maxsplit");
    if (sep && !sep->is_none() && (!sep->is_string() || sep->as_string().empty())) {
      return Status::invalid_argument("str." + name + ": the separator must be a non-empty string");
    }
    return Value(split(s, sep, maxsplit ? maxsplit->as_int() : -1, name == "rsplit"));
  }
  if (name == "splitlines") {
    List out;
    size_t at = 0;
    while (at < s.size()) {
      size_t nl = s.find_first_of("\r\n", at);
      if (nl == std::string::npos) {
        out.emplace_back(s.substr(at));
        break;
      }
      out.emplace_back(s.substr(at, nl - at));
      at = nl + ((s[nl] == '\r' && nl + 1 < s.size() && s[nl + 1] == '\n') ? 2 : 1);
    }
    return Value(std::move(out));
  }
  if (name == "upper") return Value(ascii_map(s, to_upper));
  if (name == "lower") return Value(ascii_map(s, to_lower));
  if (name == "title") return Value(title(s));
  if (name == "capitalize") return Value(capitalize(s));
  if (name == "replace") {
    const Value* old = args.get(0, "old");
    const Value* with = args.get(1, "new");
    const Value* count = args.get(2, "count");
    if (!old || !with || !old->is_string() || !with->is_string()) {
      return Status::invalid_argument("str.replace: needs two strings");
    }
    const std::string& o = old->as_string();
    int64_t left = count ? count->as_int() : -1;
    std::string out;
    size_t at = 0;
    if (o.empty()) {  // Python inserts between characters; not a template's need
      return Status::unsupported("str.replace with an empty string to replace");
    }
    for (size_t hit; left != 0 && (hit = s.find(o, at)) != std::string::npos; --left) {
      out.append(s, at, hit - at);
      out += with->as_string();
      at = hit + o.size();
      if (out.size() > kMaxOutputBytes) return Status::resource_exhausted("str.replace: the result is too large");
    }
    out.append(s, at, std::string::npos);
    return Value(out);
  }
  if (name == "find" || name == "rfind" || name == "count") {
    auto sub = string_arg("a substring");
    if (!sub.is_ok()) return sub.status();
    if (name == "count") {
      if (sub->empty()) return Value(int64_t(utf8::code_points(s).size() + 1));
      int64_t n = 0;
      for (size_t at = s.find(*sub); at != std::string::npos; at = s.find(*sub, at + sub->size())) ++n;
      return Value(n);
    }
    const size_t at = name == "find" ? s.find(*sub) : s.rfind(*sub);
    if (at == std::string::npos) return Value(int64_t(-1));
    return Value(int64_t(utf8::code_points(s.substr(0, at)).size()));  // in characters, as Python
  }
  if (name == "join") {
    if (!a0) return Status::invalid_argument("str.join: needs a list");
    auto items = iterate(*a0, "str.join");
    if (!items.is_ok()) return items.status();
    std::string out;
    for (size_t i = 0; i < items->size(); ++i) {
      if (!(*items)[i].is_string()) return type_error("str.join (an item)", (*items)[i]);
      if (i) out += s;
      out += (*items)[i].as_string();
    }
    return Value(out);
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum") {
    if (s.empty()) return Value(false);
    for (uint32_t c : utf8::code_points(s)) {
      const bool digit = c >= '0' && c <= '9', alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      const bool ok = name == "isdigit"   ? digit
                      : name == "isalpha" ? alpha
                      : name == "isalnum" ? digit || alpha
                                          : is_py_space(c);
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  return Status::unsupported("unsupported method str." + utf8::excerpt(name, 40) + "()");
}

bool is_global_function(const std::string& name) {
  return name == "range" || name == "namespace" || name == "dict" || name == "strftime_now" ||
         name == "raise_exception";
}

StatusOr<Value> call_global(const std::string& name, const Args& args) {
  if (name == "range") {
    for (const Value& v : args.pos) {
      if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) return type_error("range", v);
    }
    int64_t start = 0, stop = 0, step = 1;
    if (args.pos.size() == 1) {
      stop = args.pos[0].as_int();
    } else if (args.pos.size() == 2 || args.pos.size() == 3) {
      start = args.pos[0].as_int(), stop = args.pos[1].as_int();
      if (args.pos.size() == 3) step = args.pos[2].as_int();
    } else {
      return Status::invalid_argument("range: takes 1 to 3 integers");
    }
    if (step == 0) return Status::invalid_argument("range: the step must not be zero");
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= kMaxListItems) return Status::resource_exhausted("range: more than 65536 items");
      out.emplace_back(i);
    }
    return Value(std::move(out));
  }
  if (name == "namespace" || name == "dict") {
    Dict d;
    for (const Value& v : args.pos) {  // namespace({'a': 1}) / dict(other)
      if (v.kind() != Value::Kind::kDict) return type_error(name, v);
      for (const auto& [k, x] : v.as_dict().items) d.set(k, x);
    }
    for (const auto& [k, v] : args.kw) d.set(k, v);
    return name == "namespace" ? Value::make_namespace(std::move(d)) : Value(std::move(d));
  }
  if (name == "strftime_now") {
    if (args.pos.size() != 1 || !args.pos[0].is_string())
      return Status::invalid_argument("strftime_now: needs a format");
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, args.pos[0].as_string().c_str(), &tm);
    return Value(std::string(buf, n));
  }
  return Status::unsupported("unsupported function " + utf8::excerpt(name, 40) + "()");
}

}  // namespace tunableop::llm::jinja
