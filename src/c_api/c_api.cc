// The C ABI (tunableop/c_api.h) over the public C++ API alone: what a C, Rust or Julia caller
// reaches is exactly what a C++ caller of tunableop/gemm.h reaches. Nothing thrown crosses it
// (status_boundary), and every failure leaves its message for tunableop_last_error().
#include "tunableop/c_api.h"

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "tunableop/context.h"
#include "tunableop/gemm.h"
#include "tunableop/status_boundary.h"

struct tunableop_context {
  std::unique_ptr<tunableop::Context> ctx;
};

struct tunableop_gemm_plan {
  tunableop::GemmPlan plan;
  std::string solution;  // what tunableop_gemm_plan_solution hands out
};

namespace {

using tunableop::Status;
using tunableop::StatusCode;

thread_local std::string t_last_error;

tunableop_status to_c(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return TUNABLEOP_OK;
    case StatusCode::kUnsupported: return TUNABLEOP_UNSUPPORTED;
    case StatusCode::kInvalidArgument: return TUNABLEOP_INVALID_ARGUMENT;
    case StatusCode::kNotFound: return TUNABLEOP_NOT_FOUND;
    case StatusCode::kIoError: return TUNABLEOP_IO_ERROR;
    case StatusCode::kParseError: return TUNABLEOP_PARSE_ERROR;
    case StatusCode::kNumericsMismatch: return TUNABLEOP_NUMERICS_MISMATCH;
    case StatusCode::kDeviceError: return TUNABLEOP_DEVICE_ERROR;
    case StatusCode::kInternal: return TUNABLEOP_INTERNAL;
    case StatusCode::kResourceExhausted: return TUNABLEOP_RESOURCE_EXHAUSTED;
    case StatusCode::kUnavailable: return TUNABLEOP_UNAVAILABLE;
  }
  return TUNABLEOP_INTERNAL;
}

tunableop_status report(const Status& st) {
  if (!st.is_ok()) t_last_error = st.to_string();
  return to_c(st.code());
}

// Runs `body` (returning Status) behind the C++ API's status boundary and reports its answer.
template <class Body>
tunableop_status guarded(const char* what, Body&& body) {
  return report(tunableop::status_boundary([&] { return std::string(what); }, body));
}

// A C caller may store any int in an enum field; in C++ loading a value outside the enum's range
// is undefined (UBSan's -fsanitize=enum stops on it). So the bytes are read as the underlying
// integer and only a value checked against the enumerators is ever used as the enum.
template <class E>
long long raw_value(const E& e) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<long long>(v);
}

tunableop::StatusOr<tunableop::DType> dtype_of(const tunableop_dtype& field_value, const char* field) {
  const long long d = raw_value(field_value);
  switch (d) {
    case TUNABLEOP_F32: return tunableop::DType::kF32;
    case TUNABLEOP_F64: return tunableop::DType::kF64;
    case TUNABLEOP_BF16: return tunableop::DType::kBF16;
    case TUNABLEOP_F16: return tunableop::DType::kF16;
  }
  return Status::invalid_argument(std::string(field) + " is not a tunableop_dtype (" + std::to_string(d) + ")");
}

tunableop::StatusOr<tunableop::GemmParams> params_of(const tunableop_gemm_params* c) {
  if (!c) return Status::invalid_argument("the GEMM params pointer is NULL");
  tunableop::GemmParams p;
  auto dt = dtype_of(c->dtype, "dtype");
  if (!dt.is_ok()) return dt.status();
  auto out = dtype_of(c->out_dtype, "out_dtype");
  if (!out.is_ok()) return out.status();
  p.dtype = *dt;
  if (*out != *dt) p.out_dtype = *out;
  p.transa = c->transa;
  p.transb = c->transb;
  p.m = c->m, p.n = c->n, p.k = c->k;
  p.lda = c->lda, p.ldb = c->ldb, p.ldc = c->ldc;
  p.alpha = c->alpha, p.beta = c->beta;
  p.batch = c->batch;
  p.stride_a = c->stride_a, p.stride_b = c->stride_b, p.stride_c = c->stride_c;
  p.allow_tf32 = c->allow_tf32 != 0;
  return p;
}

}  // namespace

extern "C" {

void tunableop_gemm_params_init(tunableop_gemm_params* p) {
  if (!p) return;
  *p = tunableop_gemm_params{};
  p->dtype = p->out_dtype = TUNABLEOP_F32;
  p->transa = p->transb = 'N';
  p->alpha = 1.0;
  p->batch = 1;
}

tunableop_status tunableop_context_create(tunableop_device_kind kind, int ordinal, tunableop_context** out) {
  return guarded("tunableop_context_create", [&]() -> Status {
    if (!out) return Status::invalid_argument("tunableop_context_create: out is NULL");
    *out = nullptr;
    if (ordinal < 0) return Status::invalid_argument("device ordinal must be >= 0, got " + std::to_string(ordinal));
    tunableop::Device device;
    const long long k = raw_value(kind);
    if (k == TUNABLEOP_DEVICE_CPU)
      device = tunableop::Device::cpu();
    else if (k == TUNABLEOP_DEVICE_CUDA)
      device = tunableop::Device::cuda(ordinal);
    else
      return Status::invalid_argument("device kind " + std::to_string(k) + " is not a tunableop_device_kind");
    auto c = std::make_unique<tunableop_context>();
    c->ctx = std::make_unique<tunableop::Context>(device);
    if (!c->ctx->runtime())
      return Status::unsupported("no runtime for " + device.to_string() + " in this build or on this machine");
    *out = c.release();
    return Status::ok();
  });
}

void tunableop_context_destroy(tunableop_context* ctx) { delete ctx; }

tunableop_status tunableop_context_set(tunableop_context* ctx, const char* setting, const char* value) {
  return guarded("tunableop_context_set", [&]() -> Status {
    if (!ctx || !setting || !value) return Status::invalid_argument("tunableop_context_set: a NULL argument");
    auto s = tunableop::setting_from_name(setting);
    if (!s) return Status::invalid_argument(std::string("no setting named '") + setting + "'");
    return ctx->ctx->config().set(*s, value);
  });
}

tunableop_status tunableop_gemm(tunableop_context* ctx, const tunableop_gemm_params* p, const void* a, const void* b,
                                void* c, void* stream) {
  return guarded("tunableop_gemm", [&]() -> Status {
    if (!ctx) return Status::invalid_argument("tunableop_gemm: the context is NULL");
    auto params = params_of(p);
    if (!params.is_ok()) return params.status();
    return tunableop::gemm(*ctx->ctx, *params, {a, b, c, stream});
  });
}

tunableop_status tunableop_gemm_plan_create(tunableop_context* ctx, const tunableop_gemm_params* p,
                                            tunableop_gemm_plan** out) {
  return guarded("tunableop_gemm_plan_create", [&]() -> Status {
    if (!out) return Status::invalid_argument("tunableop_gemm_plan_create: out is NULL");
    *out = nullptr;
    if (!ctx) return Status::invalid_argument("tunableop_gemm_plan_create: the context is NULL");
    auto params = params_of(p);
    if (!params.is_ok()) return params.status();
    auto plan = tunableop::make_plan(*ctx->ctx, *params);
    if (!plan.is_ok()) return plan.status();
    *out = new tunableop_gemm_plan{std::move(*plan), {}};
    return Status::ok();
  });
}

tunableop_status tunableop_gemm_plan_run(const tunableop_gemm_plan* plan, const void* a, const void* b, void* c,
                                         void* stream) {
  return guarded("tunableop_gemm_plan_run", [&]() -> Status {
    if (!plan) return Status::invalid_argument("tunableop_gemm_plan_run: the plan is NULL");
    return plan->plan.run({a, b, c, stream});
  });
}

const char* tunableop_gemm_plan_solution(tunableop_gemm_plan* plan) {
  if (!plan) return "";
  try {
    plan->solution = plan->plan.solution();
  } catch (...) {
    plan->solution.clear();
  }
  return plan->solution.c_str();
}

void tunableop_gemm_plan_destroy(tunableop_gemm_plan* plan) { delete plan; }

const char* tunableop_status_string(tunableop_status status) {
  switch (raw_value(status)) {
    case TUNABLEOP_OK: return "ok";
    case TUNABLEOP_UNSUPPORTED: return "unsupported";
    case TUNABLEOP_INVALID_ARGUMENT: return "invalid argument";
    case TUNABLEOP_NOT_FOUND: return "not found";
    case TUNABLEOP_IO_ERROR: return "I/O error";
    case TUNABLEOP_PARSE_ERROR: return "parse error";
    case TUNABLEOP_NUMERICS_MISMATCH: return "numerics mismatch";
    case TUNABLEOP_DEVICE_ERROR: return "device error";
    case TUNABLEOP_INTERNAL: return "internal error";
    case TUNABLEOP_RESOURCE_EXHAUSTED: return "resource exhausted";
    case TUNABLEOP_UNAVAILABLE: return "unavailable";
  }
  return "unknown status";
}

const char* tunableop_last_error(void) { return t_last_error.c_str(); }

}  // extern "C"
