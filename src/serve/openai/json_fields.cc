#include "serve/openai/json_fields.h"

#include <fmt/format.h>

#include <cmath>

namespace tunableop::serve::openai {

namespace {

struct TooDeep {};

// nlohmann's messages start with "[json.exception.parse_error.101] ": the part after it is ours
// to show.
std::string parse_message(const std::exception& e) {
  std::string m = e.what();
  if (auto p = m.find("] "); m.rfind("[json.exception.", 0) == 0 && p != std::string::npos) m = m.substr(p + 2);
  return m;
}

}  // namespace

ApiOr<Json> parse_json_object(std::string_view body, int max_depth) {
  Json j;
  try {
    // The callback sees each value's depth as the parser reaches it, before anything deeper is
    // read: throwing there bounds the work and the tree.
    j = Json::parse(body.begin(), body.end(), [max_depth](int depth, Json::parse_event_t event, Json&) {
      if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
          depth >= max_depth)
        throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    return invalid_field("", fmt::format("the request body nests objects and arrays deeper than {} levels", max_depth));
  } catch (const Json::exception& e) {
    return invalid_field("", "the request body is not valid JSON: " + parse_message(e));
  }
  if (!j.is_object()) return invalid_field("", "the request body must be a JSON object, not " + json_type_phrase(j));
  return j;
}

std::string json_type_phrase(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number with a fraction or exponent";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    default: return "an unexpected value";
  }
}

const Json* find_field(const Json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

ApiOr<std::optional<int64_t>> read_int(const Json& obj, const char* field, int64_t lo, int64_t hi) {
  const Json* v = find_field(obj, field);
  if (!v) return std::optional<int64_t>{};
  auto range_error = [&](const std::string& got) {
    return invalid_field(field, fmt::format("{} must be an integer in [{}, {}] (got {})", field, lo, hi, got));
  };
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > uint64_t(INT64_MAX) || int64_t(u) > hi || int64_t(u) < lo) return range_error(std::to_string(u));
    return std::optional<int64_t>(int64_t(u));
  }
  if (v->is_number_integer()) {
    const int64_t i = v->get<int64_t>();
    if (i < lo || i > hi) return range_error(std::to_string(i));
    return std::optional<int64_t>(i);
  }
  return range_error(v->is_number_float() ? v->dump() : json_type_phrase(*v));
}

ApiOr<std::optional<double>> read_number(const Json& obj, const char* field, double lo, double hi) {
  const Json* v = find_field(obj, field);
  if (!v) return std::optional<double>{};
  if (!v->is_number())
    return invalid_field(field,
                         fmt::format("{} must be a number in [{}, {}] (got {})", field, lo, hi, json_type_phrase(*v)));
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    return invalid_field(field, fmt::format("{} must be a number in [{}, {}] (got {})", field, lo, hi, v->dump()));
  return std::optional<double>(d);
}

ApiOr<std::optional<bool>> read_bool(const Json& obj, const char* field) {
  const Json* v = find_field(obj, field);
  if (!v) return std::optional<bool>{};
  if (!v->is_boolean())
    return invalid_field(field, fmt::format("{} must be true or false (got {})", field, json_type_phrase(*v)));
  return std::optional<bool>(v->get<bool>());
}

ApiOr<std::optional<std::string>> read_string(const Json& obj, const char* field) {
  const Json* v = find_field(obj, field);
  if (!v) return std::optional<std::string>{};
  if (!v->is_string())
    return invalid_field(field, fmt::format("{} must be a string (got {})", field, json_type_phrase(*v)));
  return std::optional<std::string>(v->get<std::string>());
}

ApiOr<std::optional<uint64_t>> read_seed(const Json& obj, const char* field) {
  const Json* v = find_field(obj, field);
  if (!v) return std::optional<uint64_t>{};
  if (v->is_number_unsigned()) return std::optional<uint64_t>(v->get<uint64_t>());
  if (v->is_number_integer()) return std::optional<uint64_t>(uint64_t(v->get<int64_t>()));
  return invalid_field(field, fmt::format("{} must be an integer in [-2^63, 2^64 - 1] (got {})", field,
                                          v->is_number() ? v->dump() : json_type_phrase(*v)));
}

}  // namespace tunableop::serve::openai
