#include "llm/text/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "llm/text/utf8.h"

namespace tunableop::llm::jinja {

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Dict::find(const std::string& key) {
  for (auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  if (Value* old = find(key)) {
    *old = std::move(v);
  } else {
    items.emplace_back(key, std::move(v));
  }
}

Value::Value(List l) : kind_(Kind::kList) {
  for (const Value& v : l) {
    depth_ = std::max(depth_, v.depth_ + 1);
    holds_namespace_ = holds_namespace_ || v.holds_namespace_;
    weight_ = saturating_add(weight_, v.weight_);
  }
  list_ = std::make_shared<List>(std::move(l));
}

Value::Value(Dict d) : kind_(Kind::kDict) {
  for (const auto& kv : d.items) {
    depth_ = std::max(depth_, kv.second.depth_ + 1);
    holds_namespace_ = holds_namespace_ || kv.second.holds_namespace_;
    weight_ = saturating_add(weight_, saturating_add(text_weight(kv.first.size()), kv.second.weight_));
  }
  dict_ = std::make_shared<Dict>(std::move(d));
}

uint64_t Value::weight() const {
  if (!holds_namespace_) return weight_;
  uint64_t w = 1;
  if (kind_ == Kind::kList) {
    for (const Value& v : *list_) w = saturating_add(w, v.weight());
  } else if (is_dict()) {
    for (const auto& kv : dict_->items)
      w = saturating_add(w, saturating_add(text_weight(kv.first.size()), kv.second.weight()));
  }
  return w;
}

namespace {

template <class Json>
Value value_of_json(const Json& j, uint32_t depth = 0) {
  if (depth > kMaxValueDepth) {
    return Value::undefined("a JSON value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  }
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List l;
      for (const auto& e : j) l.push_back(value_of_json(e, depth + 1));
      return Value(std::move(l));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      for (const auto& [k, v] : j.items()) d.items.emplace_back(k, value_of_json(v, depth + 1));
      return Value(std::move(d));
    }
    default: return Value::none();
  }
}

}  // namespace

Value Value::from_json(const nlohmann::json& j) { return value_of_json(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return value_of_json(j); }

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);  // shortest round trip
  std::string sci(buf, r.ptr);
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp10 = std::stoi(sci.substr(e + 1));
  const int point = exp10 + 1;  // digits before the decimal point
  std::string out;
  if (point > 16 || point < -3) {  // Python switches to exponent notation here
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ex[16];
    std::snprintf(ex, sizeof ex, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += ex;
  } else if (point <= 0) {
    out = "0." + std::string(size_t(-point), '0') + digits;
  } else if (size_t(point) >= digits.size()) {
    out = digits + std::string(size_t(point) - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, size_t(point)) + "." + digits.substr(size_t(point));
  }
  return negative ? "-" + out : out;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0;
    case Kind::kString: return !text_.empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return !dict_->items.empty();
    case Kind::kNamespace: return true;
  }
  return false;
}

namespace {

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8::sequence_length(s, i);
    if (n == 0) n = 1;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\' || c == static_cast<unsigned char>(q)) {
      out += '\\', out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      out += buf;
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  return out + q;
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

Status json_into(const Value& v, int indent, bool sort_keys, int depth, std::string& out) {
  if (depth > 100) return Status::invalid_argument("tojson: the value is nested too deeply");
  auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(size_t(indent) * size_t(d), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Status::invalid_argument("tojson: " + v.as_string());
    case Value::Kind::kNone: out += "null"; return Status::ok();
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return Status::ok();
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return Status::ok();
    case Value::Kind::kFloat: {
      const double d = v.as_float();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
      return Status::ok();
    }
    case Value::Kind::kString: json_string(v.as_string(), out); return Status::ok();
    case Value::Kind::kList: {
      const List& l = v.as_list();
      if (l.empty()) {
        out += "[]";
        return Status::ok();
      }
      out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        TUNABLEOP_RETURN_IF_ERROR(json_into(l[i], indent, sort_keys, depth + 1, out));
      }
      newline(depth);
      out += ']';
      return Status::ok();
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.as_dict().items) items.push_back(&kv);
      if (sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      if (items.empty()) {
        out += "{}";
        return Status::ok();
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_string(items[i]->first, out);
        out += ": ";
        TUNABLEOP_RETURN_IF_ERROR(json_into(items[i]->second, indent, sort_keys, depth + 1, out));
      }
      newline(depth);
      out += '}';
      return Status::ok();
    }
  }
  return Status::ok();
}

}  // namespace

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kString: return string_repr(text_);
    case Kind::kList: {
      std::string s = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) s += (i ? ", " : "") + (*list_)[i].repr();
      return s + (tuple_ ? (list_->size() == 1 ? ",)" : ")") : "]");
    }
    case Kind::kDict: {
      std::string s = "{";
      for (size_t i = 0; i < dict_->items.size(); ++i) {
        s += (i ? ", " : "") + string_repr(dict_->items[i].first) + ": " + dict_->items[i].second.repr();
      }
      return s + "}";
    }
    default: return str();
  }
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return int_ ? "True" : "False";
    case Kind::kInt: return std::to_string(int_);
    case Kind::kFloat: return float_repr(float_);
    case Kind::kString: return text_;
    case Kind::kNamespace: return "<Namespace>";
    default: return repr();
  }
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::kFloat || o.kind_ == Kind::kFloat) return as_float() == o.as_float();
    return int_ == o.int_;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return text_ == o.text_;
    case Kind::kList:
      if (tuple_ != o.tuple_ || list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].equals((*o.list_)[i])) return false;
      }
      return true;
    case Kind::kDict:
      if (dict_->items.size() != o.dict_->items.size()) return false;
      for (const auto& [k, v] : dict_->items) {
        const Value* w = o.dict_->find(k);
        if (!w || !v.equals(*w)) return false;
      }
      return true;
    case Kind::kNamespace: return dict_ == o.dict_;
    default: return false;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return tuple_ ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
  }
  return "?";
}

StatusOr<std::string> Value::to_json(int indent, bool sort_keys) const {
  std::string out;
  TUNABLEOP_RETURN_IF_ERROR(json_into(*this, indent, sort_keys, 0, out));
  return out;
}

}  // namespace tunableop::llm::jinja
