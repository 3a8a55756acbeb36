// FusedLinear as the op framework sees it. Buffers in a fixed order per params: W, the input (or
// x and the norm weight), then the outputs (y | residual, read and written | gated | y and ids).
// The numerics check compares the output the op is about (fused_linear_reference_f64); argmax
// ids are not compared by the tuner (the tests check them against the logits).
#pragma once

#include <string>
#include <vector>

#include "ops/framework/definition.h"
#include "ops/framework/elements.h"
#include "ops/framework/problem_key.h"
#include "ops/fused_linear/reference.h"
#include "tunableop/fused_linear.h"

namespace tunableop::ops {

template <>
struct OpDefinition<FusedLinearOp> {
  using P = FusedLinearParams;
  using O = FusedLinearOperands;
  static constexpr const char* kName = "FusedLinear";

  static P normalize(const P& p) {
    P q = p;
    if (!q.norm()) q.eps = 1e-6;  // not part of a plain input's problem
    return q;
  }
  static Status validate(const P& p) { return p.validate(); }
  static bool is_empty(const P&) { return false; }  // validate() refuses empty problems
  static Status check_operands(const P& p, const O& o) {
    const bool in_ok = p.norm() ? (o.x && o.norm) : o.input != nullptr;
    const bool out_ok = p.output == FusedOutput::kAddResidual ? o.residual != nullptr
                        : p.gated()                           ? o.gated != nullptr
                        : p.output == FusedOutput::kArgmax    ? (o.y && o.ids)
                                                              : o.y != nullptr;
    if (!o.w || !in_ok || !out_ok) {
      return Status::invalid_argument("FusedLinear operand pointer is null (w, the input and the output must be set)");
    }
    return Status::ok();
  }
  static std::string op_signature(const P& p) { return fused_linear_op_signature(p); }
  static std::string params_signature(const P& p) { return fused_linear_params_signature(p); }
  static ProblemKey key(const P& p) {
    ProblemKey k;
    return k.add(int64_t(p.dtype))
        .add(p.out)
        .add(p.in)
        .add(p.tokens)
        .add(int64_t(p.input))
        .add(int64_t(p.output))
        .add(p.norm() ? int64_t(p.eps * 1e12) : 0);
  }

  static std::vector<BufferSpec> buffers(const P& p) {
    using R = BufferSpec::Role;
    std::vector<BufferSpec> b = {{"W", p.dtype, p.out * p.in, R::kInput}};
    if (p.norm()) {
      b.push_back({"x", DType::kF32, p.tokens * p.in, R::kInput});
      b.push_back({"norm", p.dtype, p.in, R::kInput});
    } else {
      b.push_back({"input", p.dtype, p.tokens * p.in, R::kInput});
    }
    if (p.output == FusedOutput::kAddResidual) {
      b.push_back({"residual", DType::kF32, p.tokens * p.out, R::kInputOutput});
    } else if (p.gated()) {
      b.push_back({"gated", p.dtype, p.tokens * (p.out / 2), R::kOutput});
    } else {
      b.push_back({"y", p.output == FusedOutput::kStoreF32 ? DType::kF32 : p.dtype, p.tokens * p.out, R::kOutput});
      // int32 ids, 4 bytes each: declared fp32 (the framework only sizes and poisons it).
      if (p.output == FusedOutput::kArgmax) b.push_back({"ids", DType::kF32, p.tokens, R::kOutput});
    }
    return b;
  }
  static O bind(const P& p, const BoundBuffers& bb) {
    O o;
    size_t i = 0;
    o.w = bb.buffers[i++];
    if (p.norm()) {
      o.x = static_cast<const float*>(bb.buffers[i++]);
      o.norm = bb.buffers[i++];
    } else {
      o.input = bb.buffers[i++];
    }
    if (p.output == FusedOutput::kAddResidual) {
      o.residual = static_cast<float*>(bb.buffers[i++]);
    } else if (p.gated()) {
      o.gated = bb.buffers[i++];
    } else {
      o.y = bb.buffers[i++];
      if (p.output == FusedOutput::kArgmax) o.ids = static_cast<int32_t*>(bb.buffers[i++]);
    }
    o.stream = bb.stream;
    o.workspace = bb.workspace;
    o.workspace_bytes = bb.workspace_bytes;
    return o;
  }
  // By the params, as buffers(p): the operands struct has a pointer for every form, and a caller
  // may set pointers this form does not read.
  static std::vector<const void*> sources(const P& p, const O& o) {
    std::vector<const void*> s = {o.w};
    if (p.norm()) {
      s.push_back(o.x);
      s.push_back(o.norm);
    } else {
      s.push_back(o.input);
    }
    if (p.output == FusedOutput::kAddResidual) {
      s.push_back(o.residual);
    } else if (p.gated()) {
      s.push_back(o.gated);
    } else {
      s.push_back(o.y);
      if (p.output == FusedOutput::kArgmax) s.push_back(o.ids);
    }
    return s;
  }
  static void* stream(const O& o) { return o.stream; }
  static OutputLayout output(const P& p) {
    const size_t index = p.norm() ? 3 : 2;  // after W and the input buffers
    const int64_t rows = p.gated() ? p.out / 2 : p.out;
    const DType t = p.output == FusedOutput::kAddResidual || p.output == FusedOutput::kStoreF32 ? DType::kF32 : p.dtype;
    return {index, t, rows, p.tokens, rows, 1, rows * p.tokens};
  }
  static double tolerance(const P& p) { return fused_linear_tolerance(p); }
  static HostCheck host_check(const P& p, const std::vector<const void*>& host) {
    const bool norm = p.norm();
    const void* input = norm ? nullptr : host[1];
    const float* x = norm ? static_cast<const float*>(host[1]) : nullptr;
    const void* nw = norm ? host[2] : nullptr;
    const float* residual =
        p.output == FusedOutput::kAddResidual ? static_cast<const float*>(host[norm ? 3 : 2]) : nullptr;
    std::vector<double> ref = fused_linear_reference_f64(p, host[0], input, x, nw, residual);
    return [o = output(p), ref = std::move(ref)](const void* out) { return layout_error(o, out, ref); };
  }
};

}  // namespace tunableop::ops
