#include "ops/scaled_gemm/reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops/framework/elements.h"

namespace tunableop {

namespace {

// Every fp8 value as a double, once: the reference reads each element many times.
std::array<double, 256> fp8_table(DType t) {
  std::array<double, 256> v{};
  for (int b = 0; b < 256; ++b) {
    const uint8_t bits = uint8_t(b);
    v[size_t(b)] = load_as_double(t, &bits, 0);
  }
  return v;
}

}  // namespace

std::vector<double> scaled_gemm_columns_f64(const ScaledGemmParams& p, const ScaledGemmOperands& o,
                                            const std::vector<int64_t>& cols, std::vector<double>* term_scale) {
  const auto ta = fp8_table(p.a_dtype), tb = fp8_table(p.b_dtype);
  const auto* a = static_cast<const uint8_t*>(o.a);
  const auto* b = static_cast<const uint8_t*>(o.b);
  const bool rowwise = p.scale_mode == ScaleMode::kRowwise;
  std::vector<double> out(size_t(p.m) * cols.size());
  if (term_scale) term_scale->assign(out.size(), 0.0);
  std::vector<double> bcol(size_t(p.k));
  for (size_t c = 0; c < cols.size(); ++c) {
    const int64_t j = cols[c];
    for (int64_t l = 0; l < p.k; ++l) bcol[size_t(l)] = tb[b[p.transb == 'N' ? l + j * p.ldb : j + l * p.ldb]];
    const double sb = double(o.scale_b[rowwise ? j : 0]);
    for (int64_t i = 0; i < p.m; ++i) {
      double acc = 0, sq = 0;
      for (int64_t l = 0; l < p.k; ++l) {
        const double t = ta[a[p.transa == 'N' ? i + l * p.lda : l + i * p.lda]] * bcol[size_t(l)];
        acc += t;
        sq += t * t;
      }
      const double s = double(o.scale_a[rowwise ? i : 0]) * sb;
      const double bias = p.bias_dtype ? load_as_double(*p.bias_dtype, o.bias, i) : 0.0;
      out[c * size_t(p.m) + size_t(i)] = s * acc + bias;
      if (term_scale) (*term_scale)[c * size_t(p.m) + size_t(i)] = std::sqrt(s * s * sq + bias * bias);
    }
  }
  return out;
}

std::vector<double> scaled_gemm_reference_f64(const ScaledGemmParams& p, const ScaledGemmOperands& o,
                                              std::vector<double>* term_scale) {
  std::vector<int64_t> cols(size_t(p.n));
  std::iota(cols.begin(), cols.end(), int64_t(0));
  std::vector<double> terms;
  const std::vector<double> v = scaled_gemm_columns_f64(p, o, cols, term_scale ? &terms : nullptr);
  std::vector<double> out(size_t(p.c_span()), 0.0);
  if (term_scale) term_scale->assign(out.size(), 0.0);
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t i = 0; i < p.m; ++i) {
      out[size_t(i + j * p.ldc)] = v[size_t(j * p.m + i)];
      if (term_scale) (*term_scale)[size_t(i + j * p.ldc)] = terms[size_t(j * p.m + i)];
    }
  return out;
}

double scaled_gemm_columns_error(const ScaledGemmParams& p, const void* c, const std::vector<int64_t>& cols,
                                 const std::vector<double>& ref, const std::vector<double>& term_scale) {
  double num = 0, den = 0, den_terms = 0;
  for (size_t cc = 0; cc < cols.size(); ++cc) {
    for (int64_t i = 0; i < p.m; ++i) {
      const double v = load_as_double(p.out_dtype, c, i + cols[cc] * p.ldc);
      if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
      const size_t e = cc * size_t(p.m) + size_t(i);
      const double d = v - ref[e];
      num += d * d;
      den += ref[e] * ref[e];
      den_terms += term_scale[e] * term_scale[e];
    }
  }
  den = std::max(den, den_terms);
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

double scaled_gemm_tolerance(const ScaledGemmParams& p) {
  double u_out = 0x1p-24;  // fp32
  if (p.out_dtype == DType::kBF16) u_out = 0x1p-8;
  if (p.out_dtype == DType::kF16) u_out = 0x1p-11;
  const double accumulate = 0x1p-12 * std::sqrt(std::max(1.0, double(p.k) / 32.0));
  const double ceiling = std::min(fp8_unit_roundoff(p.a_dtype), fp8_unit_roundoff(p.b_dtype)) / (2.0 * std::sqrt(3.0));
  return std::min(2.0 * u_out + accumulate, ceiling);
}

}  // namespace tunableop
