// Status and StatusOr: the error currency at the library boundary. No exceptions cross it.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tunableop {

enum class StatusCode {
  kOk,
  kUnsupported,      // a normal answer from a candidate: "not for this problem"
  kInvalidArgument,  // the caller passed something wrong; the message names it
  kNotFound,
  kIoError,
  kParseError,
  kNumericsMismatch,  // a candidate computed a wrong result
  kDeviceError,       // a CUDA (or other device) call failed
  kInternal,
  kResourceExhausted,  // a bounded queue or pool is full: try again later (HTTP 429)
  kUnavailable,        // the service is not taking work now: starting or shutting down (HTTP 503)
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status parse_error(std::string m) { return {StatusCode::kParseError, std::move(m)}; }
  static Status numerics(std::string m) { return {StatusCode::kNumericsMismatch, std::move(m)}; }
  static Status device_error(std::string m) { return {StatusCode::kDeviceError, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  bool is_unsupported() const { return code_ == StatusCode::kUnsupported; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: lda (3) must be >= m (5)"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}         // NOLINT(implicit)
  StatusOr(Status status) : v_(std::move(status)) {}  // NOLINT(implicit); must not be ok
  bool is_ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tunableop

// Return early from a function returning Status (or StatusOr) when `expr` fails.
#define TUNABLEOP_RETURN_IF_ERROR(expr)               \
  do {                                                \
    ::tunableop::Status _tunableop_st = (expr);       \
    if (!_tunableop_st.is_ok()) return _tunableop_st; \
  } while (0)
