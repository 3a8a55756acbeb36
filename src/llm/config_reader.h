// Typed access to config.json's fields for the config parsers (config.cc, config_families.cc):
// every wrong type or missing key becomes a message naming the file and the field. Internal
// to src/llm.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "llm/json_brief.h"
#include "tunableop/status.h"

namespace tunableop::llm::config_detail {

using json = nlohmann::json;

struct Reader {
  const json& j;
  const std::string& source;
  Status error;

  bool ok() const { return error.is_ok(); }
  void fail(const std::string& m) {
    if (error.is_ok()) error = Status::parse_error(source + ": " + m);
  }
  bool present(const char* key) const { return j.contains(key) && !j.at(key).is_null(); }
  // The key is there and says null (transformers: None, which may differ from a missing key's default).
  bool null(const char* key) const { return j.contains(key) && j.at(key).is_null(); }

  std::optional<int64_t> opt_int(const char* key) { return opt_int(j, key, ""); }
  std::optional<int64_t> opt_int(const json& obj, const char* key, const char* where) {
    if (!obj.contains(key) || obj.at(key).is_null()) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_number_integer()) {
      fail(std::string("field \"") + where + key + "\" must be an integer (got " + json_brief(v) + ")");
      return std::nullopt;
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) {
      fail(std::string("field \"") + where + key + "\" is too large (got " + json_brief(v) + ", at most 2^63 - 1)");
      return std::nullopt;
    }
    return v.get<int64_t>();
  }
  int64_t req_int(const char* key) {
    if (!present(key)) {
      fail(std::string("missing required field \"") + key + "\"");
      return 0;
    }
    return opt_int(key).value_or(0);
  }
  std::optional<double> opt_num(const json& obj, const char* key, const char* where) {
    if (!obj.contains(key) || obj.at(key).is_null()) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_number()) {
      fail(std::string("field \"") + where + key + "\" must be a number (got " + json_brief(v) + ")");
      return std::nullopt;
    }
    return v.get<double>();
  }
  std::optional<std::string> opt_str(const json& obj, const char* key, const char* where = "") {
    if (!obj.contains(key) || obj.at(key).is_null()) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_string()) {
      fail(std::string("field \"") + where + key + "\" must be a string (got " + json_brief(v) + ")");
      return std::nullopt;
    }
    return v.get<std::string>();
  }
  std::optional<bool> opt_bool(const char* key) { return opt_bool(j, key, ""); }
  std::optional<bool> opt_bool(const json& obj, const char* key, const char* where) {
    if (!obj.contains(key) || obj.at(key).is_null()) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_boolean()) {
      fail(std::string("field \"") + where + key + "\" must be true or false (got " + json_brief(v) + ")");
      return std::nullopt;
    }
    return v.get<bool>();
  }
};

}  // namespace tunableop::llm::config_detail

namespace tunableop::llm {
struct ModelConfig;
namespace config_detail {
// RoPE: `rope_parameters` (transformers 5) or top-level `rope_theta` with an optional
// `rope_scaling` (transformers 4), into c.rope_theta and c.rope.
void read_rope(Reader& r, ModelConfig& c);
// The family's features (biases, norms, windows and layer types, softcapping, attention scale)
// and the defaults transformers' config class gives the ones config.json leaves out.
void read_family_features(Reader& r, ModelConfig& c);
}  // namespace config_detail
}  // namespace tunableop::llm
