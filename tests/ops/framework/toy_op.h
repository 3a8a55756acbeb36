// A whole tunable op in one small header, written the way docs/design.md ("How to add an op")
// says: y = alpha * x over n elements. Its candidates cost virtual time, so tuning decisions
// are exact; the tests of the op framework run on it.
#pragma once

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ops/framework/dispatch.h"
#include "tunableop/context.h"

namespace tunableop::toy {

// 1. Params, operands and the op tag.
struct ScaleOp;
struct ScaleParams {
  using Op = ScaleOp;
  DType dtype = DType::kF32;
  int64_t n = 0;
  double alpha = 1.0;
};
struct ScaleOperands {
  const void* x = nullptr;
  void* y = nullptr;
  void* stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};
struct ScaleOp {
  using Params = ScaleParams;
  using Operands = ScaleOperands;
};
using ScaleCandidate = Candidate<ScaleOp>;

// The plain call and the plan, as an op's dispatch.cc would define them.
inline Status scale(Context& ctx, const ScaleParams& p, const ScaleOperands& o) {
  return ops::Dispatcher<ScaleOp>::call(ctx, p, o);
}
inline StatusOr<Plan<ScaleOp>> make_plan(Context& ctx, const ScaleParams& p) {
  return ops::Dispatcher<ScaleOp>::make_plan(ctx, p);
}

}  // namespace tunableop::toy

namespace tunableop::ops {

// 2. Signature, key, buffers and the fp64 reference check.
template <>
struct OpDefinition<toy::ScaleOp> {
  using P = toy::ScaleParams;
  using O = toy::ScaleOperands;
  static constexpr const char* kName = "Scale";
  static P normalize(const P& p) { return p; }
  static Status validate(const P& p) {
    if (p.n < 0) return Status::invalid_argument(fmt::format("n must be >= 0, got {}", p.n));
    if (p.dtype != DType::kF32 && p.dtype != DType::kF64) return Status::invalid_argument("fp32 or fp64 only");
    return Status::ok();
  }
  static bool is_empty(const P& p) { return p.n == 0; }
  static Status check_operands(const P&, const O& o) {
    return o.x && o.y ? Status::ok() : Status::invalid_argument("Scale operand pointer is null");
  }
  static std::string op_signature(const P& p) { return fmt::format("ScaleTunableOp_{}", dtype_torch_name(p.dtype)); }
  static std::string params_signature(const P& p) { return fmt::format("n_{}", p.n); }
  static ProblemKey key(const P& p) { return {int64_t(p.dtype), p.n}; }
  static std::vector<BufferSpec> buffers(const P& p) {
    return {{"x", p.dtype, p.n, BufferSpec::Role::kInput}, {"y", p.dtype, p.n, BufferSpec::Role::kOutput}};
  }
  static O bind(const P&, const BoundBuffers& b) {
    return {b.buffers[0], b.buffers[1], b.stream, b.workspace, b.workspace_bytes};
  }
  static std::vector<const void*> sources(const O& o) { return {o.x, o.y}; }
  static void* stream(const O& o) { return o.stream; }
  static OutputLayout output(const P& p) { return {1, p.dtype, p.n, 1, p.n, 1, p.n}; }
  static double tolerance(const P&) { return 1e-6; }
  static HostCheck host_check(const P& p, const std::vector<const void*>& host) {
    std::vector<double> ref(size_t(p.n));
    for (int64_t i = 0; i < p.n; ++i) ref[size_t(i)] = p.alpha * load_as_double(p.dtype, host[0], i);
    return [o = output(p), ref](const void* y) { return layout_error(o, y, ref); };
  }
};

}  // namespace tunableop::ops
