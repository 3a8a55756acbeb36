// GEMM as the op framework sees it (src/ops/framework/definition.h says what each piece is for).
#pragma once

#include <string>
#include <vector>

#include "ops/framework/definition.h"
#include "ops/framework/problem_key.h"
#include "ops/gemm/reference.h"
#include "tunableop/gemm.h"

namespace tunableop::ops {

template <>
struct OpDefinition<GemmOp> {
  static constexpr const char* kName = "GEMM";
  static GemmParams normalize(const GemmParams& p) { return p.with_defaults(); }
  static Status validate(const GemmParams& p) { return p.validate(); }
  static bool is_empty(const GemmParams& p) { return p.m == 0 || p.n == 0; }
  static Status check_operands(const GemmParams& p, const GemmOperands& o) {
    if ((p.k > 0 && (!o.a || !o.b)) || !o.c)
      return Status::invalid_argument("GEMM operand pointer is null (a, b and c must be set)");
    return Status::ok();
  }
  static std::string op_signature(const GemmParams& p) { return gemm_op_signature(p); }
  static std::string params_signature(const GemmParams& p) { return gemm_params_signature(p); }
  // What the signatures encode, plus whether C is read (beta != 0: another tuning problem).
  static ProblemKey key(const GemmParams& p) {
    return {int64_t(p.dtype) + 8 * int64_t(p.c_dtype()),
            p.transa,
            p.transb,
            p.m,
            p.n,
            p.k,
            p.lda,
            p.ldb,
            p.ldc,
            p.batch,
            p.stride_a,
            p.stride_b,
            p.stride_c,
            p.allow_tf32,
            p.beta != 0.0};
  }

  static std::vector<BufferSpec> buffers(const GemmParams& p) {
    using R = BufferSpec::Role;
    return {{"A", p.dtype, p.a_span(), R::kInput},
            {"B", p.dtype, p.b_span(), R::kInput},
            {"C", p.c_dtype(), p.c_span(), p.beta != 0.0 ? R::kInputOutput : R::kOutput}};
  }
  static GemmOperands bind(const GemmParams&, const BoundBuffers& b) {
    return {b.buffers[0], b.buffers[1], b.buffers[2], b.stream, b.workspace, b.workspace_bytes};
  }
  static std::vector<const void*> sources(const GemmOperands& o) { return {o.a, o.b, o.c}; }
  static void* stream(const GemmOperands& o) { return o.stream; }
  static OutputLayout output(const GemmParams& p) { return {2, p.c_dtype(), p.m, p.n, p.ldc, p.batch, p.stride_c}; }
  static double tolerance(const GemmParams& p) { return gemm_tolerance(p); }
  // Freivalds' test in fp64: O(mk + kn + mn) per vector instead of O(mnk) for the full product.
  static HostCheck host_check(const GemmParams& p, const std::vector<const void*>& host) {
    return [p, a = host[0], b = host[1], c0 = p.beta != 0.0 ? host[2] : nullptr](const void* c) {
      return freivalds_error(p, a, b, c0, c);
    };
  }
};

}  // namespace tunableop::ops
