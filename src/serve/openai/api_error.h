// OpenAI-style errors: what every failed request answers, with its HTTP status.
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens", "code": null}}
// Validation names the offending field in `param` and in the message, so a client can tell what
// to fix without reading the server's log.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "tunableop/status.h"

namespace tunableop::serve::openai {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault; empty: none (null in the JSON)
  std::string code;   // a machine-readable code ("model_not_found"); empty: null
};

// 400 invalid_request_error naming `param`.
ApiError invalid_field(std::string param, std::string message);
// The JSON body {"error": {...}}.
std::string error_body(const ApiError& e);
// A Backend's Status as an HTTP error: kInvalidArgument 400, kResourceExhausted 429,
// kUnavailable 503, anything else 500 (the message kept: it names what failed).
ApiError error_from_status(const Status& s);

// A value or the ApiError that explains why there is none.
template <class T>
class ApiOr {
 public:
  ApiOr(T value) : v_(std::move(value)) {}         // NOLINT(implicit)
  ApiOr(ApiError error) : v_(std::move(error)) {}  // NOLINT(implicit)
  bool ok() const { return std::holds_alternative<T>(v_); }
  const ApiError& error() const { return std::get<ApiError>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, ApiError> v_;
};

}  // namespace tunableop::serve::openai
