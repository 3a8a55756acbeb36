#include "serve/openai/api_error.h"

#include <nlohmann/json.hpp>

namespace tunableop::serve::openai {

ApiError invalid_field(std::string param, std::string message) {
  ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

std::string error_body(const ApiError& e) {
  nlohmann::json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  // Messages may quote what the client sent; replace rather than throw on bytes that are not UTF-8.
  return nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError error_from_status(const Status& s) {
  ApiError e;
  e.message = s.message().empty() ? s.to_string() : s.message();
  switch (s.code()) {
    case StatusCode::kInvalidArgument: e.http_status = 400; break;
    case StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "queue_full";
      break;
    case StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "service_unavailable";
      break;
    default:
      e.http_status = 500;
      e.type = "internal_error";
      e.message = s.to_string();
      break;
  }
  return e;
}

}  // namespace tunableop::serve::openai
