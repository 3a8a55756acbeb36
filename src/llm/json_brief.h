// A JSON value as an error message may show it (issue 33, finding 4): a number, boolean or null
// as written, a string cut to 60 bytes, an array or object by its size alone. Never recursive:
// dump() recurses once per level, so a typed field nested 100,000 levels deep in config.json,
// generation_config.json or tokenizer_config.json overflowed the stack while the message about
// it was being built.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace tunableop::llm {

inline std::string json_brief(const nlohmann::json& v) {
  using T = nlohmann::json::value_t;
  switch (v.type()) {
    case T::object: return "an object of " + std::to_string(v.size()) + " keys";
    case T::array: return "an array of " + std::to_string(v.size()) + " elements";
    case T::string: {
      const std::string& s = v.get_ref<const std::string&>();
      nlohmann::json cut = s.size() > 60 ? s.substr(0, 60) + "..." : s;
      // A cut may split a UTF-8 sequence: replaced, never thrown about.
      return cut.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    default: return v.dump();  // a scalar: no recursion
  }
}

}  // namespace tunableop::llm
