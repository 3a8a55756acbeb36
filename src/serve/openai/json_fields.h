// Reading a request body that anyone may send: the JSON parse bounded in depth, and typed field
// readers whose errors name the field and what it holds instead ("max_tokens must be an integer
// in [1, 4096] (got a string)"). Absent and null fields read as std::nullopt.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "serve/openai/api_error.h"

namespace tunableop::serve::openai {

using Json = nlohmann::json;

// Objects and arrays nested deeper than this are refused while parsing (the parser counts the
// depth as it goes, so a body of 100,000 '[' never builds a deep tree).
constexpr int kMaxJsonDepth = 32;

// The body as a JSON object. NaN, Infinity, numbers that overflow a double, bytes that are not
// UTF-8, trailing garbage and nesting past max_depth are errors naming the place.
ApiOr<Json> parse_json_object(std::string_view body, int max_depth = kMaxJsonDepth);

// "a string", "an integer", "a number", "an object", ... for messages.
std::string json_type_phrase(const Json& v);

ApiOr<std::optional<int64_t>> read_int(const Json& obj, const char* field, int64_t lo, int64_t hi);
// Any finite JSON number (integers included) in [lo, hi].
ApiOr<std::optional<double>> read_number(const Json& obj, const char* field, double lo, double hi);
ApiOr<std::optional<bool>> read_bool(const Json& obj, const char* field);
ApiOr<std::optional<std::string>> read_string(const Json& obj, const char* field);
// A 64-bit seed: any integer in [-2^63, 2^64 - 1], negative ones taken modulo 2^64.
ApiOr<std::optional<uint64_t>> read_seed(const Json& obj, const char* field);

// The value of `field` when present and not null.
const Json* find_field(const Json& obj, const char* field);

}  // namespace tunableop::serve::openai
