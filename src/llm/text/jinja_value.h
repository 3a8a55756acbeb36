// The values of the chat-template renderer (jinja.h): what Jinja's Python objects are in the
// templates models ship. None, booleans, 64-bit integers, doubles, UTF-8 strings, lists and
// insertion-ordered dicts with string keys (JSON's shapes: messages, tools), namespaces (the
// one mutable object), and Undefined, which remembers what was looked up so that using it in a
// way Jinja refuses gives Jinja's message. Printing, equality, truthiness and JSON follow Python.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tunableop/status.h"

namespace tunableop::llm::jinja {

class Value;
using List = std::vector<Value>;
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
  void set(const std::string& key, Value v);
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace };

  Value() = default;  // undefined
  static Value undefined(std::string what) {
    Value v;
    v.text_ = std::move(what);
    return v;
  }
  static Value none() { return Value(Kind::kNone); }
  Value(bool b) : kind_(Kind::kBool), int_(b) {}       // NOLINT: literals convert
  Value(int64_t i) : kind_(Kind::kInt), int_(i) {}     // NOLINT
  Value(int i) : kind_(Kind::kInt), int_(i) {}         // NOLINT
  Value(double d) : kind_(Kind::kFloat), float_(d) {}  // NOLINT
  Value(std::string s) : kind_(Kind::kString), text_(std::move(s)) { weight_ = text_weight(text_.size()); }  // NOLINT
  Value(const char* s) : kind_(Kind::kString), text_(s) { weight_ = text_weight(text_.size()); }             // NOLINT
  Value(List l);                                                                                             // NOLINT
  Value(Dict d);                                                                                             // NOLINT
  // A Python tuple: a list that prints as (a, b) and differs from a list in ==.
  static Value tuple(List l) {
    Value v(std::move(l));
    v.tuple_ = true;
    return v;
  }
  static Value make_namespace(Dict d) {
    Value v(std::move(d));
    v.kind_ = Kind::kNamespace;
    v.holds_namespace_ = true;
    return v;
  }
  // JSON values; ordered_json keeps the objects' key order (Python's dicts do).
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  // Levels of lists and dicts inside (0 for a scalar): printing, comparing and JSON recurse
  // this deep, so the renderer refuses values past kMaxValueDepth.
  uint32_t depth() const { return depth_; }
  // What walking the whole value costs (printing, comparing, JSON): one per list item, dict
  // entry and scalar, one more per 64 bytes of text, shared parts counted each time they are
  // reached; saturating. The renderer charges it against its work limit.
  uint64_t weight() const;
  static uint64_t text_weight(size_t bytes) { return 1 + bytes / 64; }  // a string's, or a dict key's
  // Whether a namespace is reachable from here. Namespaces are the one mutable value: one may
  // not hold another (so none can come to hold itself), and what holds one is weighed afresh.
  bool holds_namespace() const { return holds_namespace_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // bools too
  double as_float() const { return kind_ == Kind::kFloat ? float_ : double(int_); }
  const std::string& as_string() const { return text_; }  // also the Undefined's description
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& mutable_dict() { return *dict_; }  // namespaces only

  // Python's truth value (Undefined is false).
  bool truthy() const;
  // Python's str() (Jinja's {{ }}): None -> "None", True -> "True", lists as their repr.
  std::string str() const;
  // Python's repr().
  std::string repr() const;
  // Python's ==.
  bool equals(const Value& o) const;
  // Python's type name ("str", "int", "dict", "NoneType", "Undefined") for messages.
  std::string type_name() const;

  // json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=...) as transformers' tojson
  // filter does; indent < 0: one line with ", " and ": ".
  StatusOr<std::string> to_json(int indent, bool sort_keys) const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  int64_t int_ = 0;
  double float_ = 0;
  bool tuple_ = false;
  uint32_t depth_ = 0;
  bool holds_namespace_ = false;
  uint64_t weight_ = 1;  // as of construction; weight() recomputes it when a namespace is inside
  std::string text_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
};

constexpr uint32_t kMaxValueDepth = 200;

// a + b, or UINT64_MAX when that overflows (weights and the renderer's work count).
inline uint64_t saturating_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

// Python's repr of a float ("1.0", "0.1", "1e+20", "inf", "nan").
std::string float_repr(double d);

}  // namespace tunableop::llm::jinja
