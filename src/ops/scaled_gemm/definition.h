// ScaledGemm as the op framework sees it. Its buffers are fixed (A, B, scale_a, scale_b, bias,
// C); a problem without bias has an empty bias buffer. Numerics on the CPU compare with the
// fp64 reference on the dequantized values (every column when m*n*k is small, else
// kSampledColumns evenly spread columns, plus a scan that every element of C was written).
#pragma once

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ops/framework/definition.h"
#include "ops/framework/elements.h"
#include "ops/framework/problem_key.h"
#include "ops/scaled_gemm/reference.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop::ops {

template <>
struct OpDefinition<ScaledGemmOp> {
  using P = ScaledGemmParams;
  using O = ScaledGemmOperands;
  enum Buffer : size_t { kA, kB, kScaleA, kScaleB, kBias, kC };
  static constexpr const char* kName = "ScaledGemm";
  static constexpr int64_t kFullReferenceMacs = int64_t(1) << 26;
  static constexpr int64_t kSampledColumns = 64;

  static P normalize(const P& p) { return p.with_defaults(); }
  static Status validate(const P& p) { return p.validate(); }
  static bool is_empty(const P& p) { return p.m == 0 || p.n == 0; }
  static Status check_operands(const P& p, const O& o) {
    if (!o.a || !o.b || !o.scale_a || !o.scale_b || !o.c || (p.has_bias() && !o.bias))
      return Status::invalid_argument(
          "ScaledGemm operand pointer is null (a, b, scale_a, scale_b and c must be set, and bias for a problem with "
          "one)");
    return Status::ok();
  }
  static std::string op_signature(const P& p) { return scaled_gemm_op_signature(p); }
  static std::string params_signature(const P& p) { return scaled_gemm_params_signature(p); }
  static ProblemKey key(const P& p) {
    const int64_t bias = p.bias_dtype ? 1 + int64_t(*p.bias_dtype) : 0;
    return {int64_t(p.a_dtype) | int64_t(p.b_dtype) << 8 | int64_t(p.out_dtype) << 16 | bias << 24,
            int64_t(p.scale_mode),
            p.transa,
            p.transb,
            p.m,
            p.n,
            p.k,
            p.lda,
            p.ldb,
            p.ldc};
  }

  static std::vector<BufferSpec> buffers(const P& p) {
    using R = BufferSpec::Role;
    return {{"A", p.a_dtype, p.a_span(), R::kInput},
            {"B", p.b_dtype, p.b_span(), R::kInput},
            {"scale_a", DType::kF32, p.scale_a_count(), R::kInput},
            {"scale_b", DType::kF32, p.scale_b_count(), R::kInput},
            {"bias", p.bias_dtype.value_or(p.out_dtype), p.has_bias() ? p.m : 0, R::kInput},
            {"C", p.out_dtype, p.c_span(), R::kOutput}};
  }
  static O bind(const P& p, const BoundBuffers& b) {
    O o;
    o.a = b.buffers[kA], o.b = b.buffers[kB];
    o.scale_a = static_cast<const float*>(b.buffers[kScaleA]);
    o.scale_b = static_cast<const float*>(b.buffers[kScaleB]);
    o.bias = p.has_bias() ? b.buffers[kBias] : nullptr;
    o.c = b.buffers[kC], o.stream = b.stream, o.workspace = b.workspace, o.workspace_bytes = b.workspace_bytes;
    return o;
  }
  static std::vector<const void*> sources(const P& p, const O& o) {
    return {o.a, o.b, o.scale_a, o.scale_b, p.has_bias() ? o.bias : nullptr, o.c};
  }
  static void* stream(const O& o) { return o.stream; }
  static OutputLayout output(const P& p) { return {kC, p.out_dtype, p.m, p.n, p.ldc, 1, p.c_span()}; }
  static double tolerance(const P& p) { return scaled_gemm_tolerance(p); }
  static HostCheck host_check(const P& p, const std::vector<const void*>& host) {
    std::vector<int64_t> cols;
    if (p.m * p.n * p.k <= kFullReferenceMacs || p.n <= kSampledColumns) {
      cols.resize(size_t(p.n));
      std::iota(cols.begin(), cols.end(), int64_t(0));
    } else {
      for (int64_t c = 0; c < kSampledColumns; ++c) cols.push_back(c * (p.n - 1) / (kSampledColumns - 1));
    }
    O o;
    o.a = host[kA], o.b = host[kB], o.bias = host[kBias];
    o.scale_a = static_cast<const float*>(host[kScaleA]);
    o.scale_b = static_cast<const float*>(host[kScaleB]);
    std::vector<double> terms;
    std::vector<double> ref = scaled_gemm_columns_f64(p, o, cols, &terms);
    return [p, cols = std::move(cols), ref = std::move(ref), terms = std::move(terms)](const void* c) {
      for (int64_t j = 0; j < p.n; ++j)  // every element written, sampled or not
        for (int64_t i = 0; i < p.m; ++i)
          if (!std::isfinite(load_as_double(p.out_dtype, c, i + j * p.ldc)))
            return std::numeric_limits<double>::infinity();
      return scaled_gemm_columns_error(p, c, cols, ref, terms);
    };
  }
  // Scales of random operands are positive, as a quantizer makes them ([0.25, 2]: a scale is a
  // factor, not a signed number); A, B and bias get the usual uniform [-1, 1].
  static bool fill_random(const P& p, size_t buffer, void* host, std::mt19937_64& rng) {
    if (buffer != kScaleA && buffer != kScaleB) return false;
    std::uniform_real_distribution<float> dist(0.25f, 2.0f);
    const int64_t count = buffer == kScaleA ? p.scale_a_count() : p.scale_b_count();
    for (int64_t i = 0; i < count; ++i) static_cast<float*>(host)[i] = dist(rng);
    return true;
  }
};

}  // namespace tunableop::ops
