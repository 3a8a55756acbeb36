// GemmAndBias as the op framework sees it. Its numerics on the CPU compare with the fp64
// reference (every column when m*n*k is small, else kSampledColumns evenly spread columns,
// plus a scan that every element of C was written): Freivalds' test, what GEMM uses, does not
// survive a nonlinear activation.
#pragma once

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "ops/framework/definition.h"
#include "ops/framework/problem_key.h"
#include "ops/gemm/definition.h"
#include "ops/gemm_and_bias/reference.h"
#include "tunableop/gemm_and_bias.h"

namespace tunableop::ops {

template <>
struct OpDefinition<GemmAndBiasOp> {
  using Gemm = OpDefinition<GemmOp>;
  static constexpr const char* kName = "GemmAndBias";
  static constexpr int64_t kFullReferenceMacs = int64_t(1) << 26;
  static constexpr int64_t kSampledColumns = 64;

  static GemmAndBiasParams normalize(const GemmAndBiasParams& p) { return p.with_defaults(); }
  static Status validate(const GemmAndBiasParams& p) { return p.validate(); }
  static bool is_empty(const GemmAndBiasParams& p) { return Gemm::is_empty(p.gemm); }
  static Status check_operands(const GemmAndBiasParams& p, const GemmAndBiasOperands& o) {
    if ((p.gemm.k > 0 && (!o.a || !o.b)) || !o.c || !o.bias)
      return Status::invalid_argument("GemmAndBias operand pointer is null (a, b, bias and c must be set)");
    return Status::ok();
  }
  static std::string op_signature(const GemmAndBiasParams& p) { return gemm_and_bias_op_signature(p); }
  static std::string params_signature(const GemmAndBiasParams& p) { return gemm_and_bias_params_signature(p); }
  static ProblemKey key(const GemmAndBiasParams& p) { return Gemm::key(p.gemm).add(int64_t(p.act)); }

  static std::vector<BufferSpec> buffers(const GemmAndBiasParams& p) {
    const GemmParams& g = p.gemm;  // beta is 0: C is an output only
    return {{"A", g.dtype, g.a_span(), BufferSpec::Role::kInput},
            {"B", g.dtype, g.b_span(), BufferSpec::Role::kInput},
            {"bias", g.dtype, g.m, BufferSpec::Role::kInput},
            {"C", g.dtype, g.c_span(), BufferSpec::Role::kOutput}};
  }
  static GemmAndBiasOperands bind(const GemmAndBiasParams&, const BoundBuffers& b) {
    return {b.buffers[0], b.buffers[1], b.buffers[2], b.buffers[3], b.stream, b.workspace, b.workspace_bytes};
  }
  static std::vector<const void*> sources(const GemmAndBiasOperands& o) { return {o.a, o.b, o.bias, o.c}; }
  static void* stream(const GemmAndBiasOperands& o) { return o.stream; }
  static OutputLayout output(const GemmAndBiasParams& p) {
    const GemmParams& g = p.gemm;
    return {3, g.dtype, g.m, g.n, g.ldc, 1, g.stride_c};
  }
  static double tolerance(const GemmAndBiasParams& p) { return gemm_and_bias_tolerance(p); }
  static HostCheck host_check(const GemmAndBiasParams& p, const std::vector<const void*>& host) {
    const GemmParams& g = p.gemm;
    std::vector<int64_t> cols;
    if (g.m * g.n * std::max<int64_t>(g.k, 1) <= kFullReferenceMacs || g.n <= kSampledColumns) {
      cols.resize(size_t(g.n));
      std::iota(cols.begin(), cols.end(), int64_t(0));
    } else {
      for (int64_t c = 0; c < kSampledColumns; ++c) cols.push_back(c * (g.n - 1) / (kSampledColumns - 1));
    }
    std::vector<double> ref = gemm_and_bias_columns_f64(p, host[0], host[1], host[2], cols);
    return [p, cols = std::move(cols), ref = std::move(ref)](const void* c) {
      const GemmParams& g = p.gemm;
      for (int64_t j = 0; j < g.n; ++j)  // every element written, sampled or not
        for (int64_t r = 0; r < g.m; ++r)
          if (!std::isfinite(load_as_double(g.dtype, c, r + j * g.ldc))) return std::numeric_limits<double>::infinity();
      return gemm_and_bias_columns_error(p, c, cols, ref);
    };
  }
};

}  // namespace tunableop::ops
