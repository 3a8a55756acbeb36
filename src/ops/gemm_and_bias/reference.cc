#include "ops/gemm_and_bias/reference.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>

#include "ops/gemm/reference.h"

namespace tunableop {

double apply_activation(Activation act, double x) {
  switch (act) {
    case Activation::kNone: return x;
    case Activation::kRelu: return x > 0 ? x : 0.0;
    case Activation::kGelu: {
      constexpr double kSqrt2OverPi = 0.79788456080286535588;
      return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
    }
  }
  return x;
}

std::vector<double> gemm_and_bias_columns_f64(const GemmAndBiasParams& p, const void* a, const void* b,
                                              const void* bias, const std::vector<int64_t>& cols) {
  const GemmParams& g = p.gemm;
  std::vector<double> out(size_t(g.m) * cols.size());
  std::vector<double> bcol(size_t(g.k));
  for (size_t c = 0; c < cols.size(); ++c) {
    const int64_t j = cols[c];
    for (int64_t l = 0; l < g.k; ++l)
      bcol[size_t(l)] = load_as_double(g.dtype, b, g.transb == 'N' ? l + j * g.ldb : j + l * g.ldb);
    for (int64_t i = 0; i < g.m; ++i) {
      double acc = 0;
      for (int64_t l = 0; l < g.k; ++l)
        acc += load_as_double(g.dtype, a, g.transa == 'N' ? i + l * g.lda : l + i * g.lda) * bcol[size_t(l)];
      out[c * size_t(g.m) + size_t(i)] = apply_activation(p.act, g.alpha * acc + load_as_double(g.dtype, bias, i));
    }
  }
  return out;
}

std::vector<double> gemm_and_bias_reference_f64(const GemmAndBiasParams& p, const void* a, const void* b,
                                                const void* bias, const void* c_in) {
  const GemmParams& g = p.gemm;
  std::vector<double> out(size_t(g.c_span()), 0.0);
  if (c_in)
    for (int64_t e = 0; e < g.c_span(); ++e) out[size_t(e)] = load_as_double(g.dtype, c_in, e);
  std::vector<int64_t> cols(size_t(g.n));
  std::iota(cols.begin(), cols.end(), int64_t(0));
  std::vector<double> v = gemm_and_bias_columns_f64(p, a, b, bias, cols);
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t i = 0; i < g.m; ++i) out[size_t(i + j * g.ldc)] = v[size_t(j * g.m + i)];
  return out;
}

double gemm_and_bias_columns_error(const GemmAndBiasParams& p, const void* c, const std::vector<int64_t>& cols,
                                   const std::vector<double>& ref) {
  const GemmParams& g = p.gemm;
  double num = 0, den = 0;
  for (size_t cc = 0; cc < cols.size(); ++cc) {
    for (int64_t i = 0; i < g.m; ++i) {
      double v = load_as_double(g.dtype, c, i + cols[cc] * g.ldc);
      if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
      double r = ref[cc * size_t(g.m) + size_t(i)], d = v - r;
      num += d * d;
      den += r * r;
    }
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

double gemm_and_bias_tolerance(const GemmAndBiasParams& p) {
  // cuBLASLt's GELU epilogue may use the GPU's approximate tanh (relative error about 2^-11),
  // which is far above fp32 rounding; a wrong kernel is still off by O(1).
  return 2.0 * gemm_tolerance(p.gemm) + (p.act == Activation::kGelu ? 2e-3 : 0.0);
}

void bias_activation_host(const GemmAndBiasParams& p, void* c, const void* bias) {
  const GemmParams& g = p.gemm;
  auto pass = [&](auto* cc, const auto* bb) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(bb)>>;
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        T& v = cc[i + j * g.ldc];
        v = T(apply_activation(p.act, double(v) + double(bb[i])));
      }
  };
  switch (g.dtype) {
    case DType::kF32: pass(static_cast<float*>(c), static_cast<const float*>(bias)); return;
    case DType::kF64: pass(static_cast<double*>(c), static_cast<const double*>(bias)); return;
    case DType::kBF16:
    case DType::kF16:
      // 16-bit types: through the generic element accessors (fp64 math, one rounding at the end).
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t i = 0; i < g.m; ++i) {
          const int64_t e = i + j * g.ldc;
          store_from_double(g.dtype, c, e,
                            apply_activation(p.act, load_as_double(g.dtype, c, e) + load_as_double(g.dtype, bias, i)));
        }
      return;
    case DType::kF8E4M3:
    case DType::kF8E5M2: return;  // never a GEMM's dtype (validate refuses fp8)
  }
}

}  // namespace tunableop
