#include "ops/fused_linear/reference.h"

#include <cmath>

#include "ops/framework/elements.h"
#include "tunableop/half.h"

namespace tunableop {

namespace {

double round_to(DType t, double v) {
  return t == DType::kBF16 ? double(to_float(to_bf16(float(v)))) : double(float(v));
}

double gate(FusedOutput o, double g) {
  switch (o) {
    case FusedOutput::kGatedSilu: return g / (1 + std::exp(-g));
    case FusedOutput::kGatedGeluTanh: return 0.5 * g * (1 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
    case FusedOutput::kGatedGeluErf: return 0.5 * g * (1 + std::erf(g * 0.7071067811865476));
    default: return g;
  }
}

}  // namespace

std::vector<double> fused_linear_reference_f64(const FusedLinearParams& p, const void* w, const void* input,
                                               const float* x, const void* norm, const float* residual) {
  const int64_t T = p.tokens, K = p.in, M = p.out;
  // The input as the kernels see it: rmsnorm rounded to dtype, or the given one.
  std::vector<double> b(size_t(T * K));
  for (int64_t t = 0; t < T; ++t) {
    if (!p.norm()) {
      for (int64_t i = 0; i < K; ++i) b[size_t(t * K + i)] = load_as_double(p.dtype, input, t * K + i);
      continue;
    }
    double ss = 0;
    for (int64_t i = 0; i < K; ++i) ss += double(x[t * K + i]) * x[t * K + i];
    const double inv = 1.0 / std::sqrt(ss / double(K) + p.eps);
    for (int64_t i = 0; i < K; ++i) {
      const double nw = load_as_double(p.dtype, norm, i);
      b[size_t(t * K + i)] =
          round_to(p.dtype, x[t * K + i] * inv * (p.input == FusedInput::kRmsNormPlusOne ? 1 + nw : nw));
    }
  }
  std::vector<double> y(size_t(T * M));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < M; ++r) {
      double s = 0;
      for (int64_t i = 0; i < K; ++i) s += load_as_double(p.dtype, w, r * K + i) * b[size_t(t * K + i)];
      y[size_t(t * M + r)] = s;
    }
  if (p.output == FusedOutput::kStore || p.output == FusedOutput::kArgmax || p.output == FusedOutput::kStoreF32)
    return y;
  if (p.output == FusedOutput::kAddResidual) {
    for (size_t i = 0; i < y.size(); ++i) y[i] = double(residual[i]) + round_to(p.dtype, y[i]);
    return y;
  }
  const int64_t H = M / 2;
  std::vector<double> g(size_t(T * H));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) {
      const double gv = round_to(p.dtype, y[size_t(t * M + i)]), uv = round_to(p.dtype, y[size_t(t * M + H + i)]);
      g[size_t(t * H + i)] = gate(p.output, gv) * uv;
    }
  return g;
}

std::vector<int32_t> fused_linear_argmax(const FusedLinearParams& p, const void* y) {
  std::vector<int32_t> ids(size_t(p.tokens), 0);
  for (int64_t t = 0; t < p.tokens; ++t) {
    double best = 0;
    bool found = false;
    for (int64_t r = 0; r < p.out; ++r) {
      const double v = load_as_double(p.dtype, y, t * p.out + r);
      if (std::isnan(v)) continue;
      if (!found || v > best) {
        best = v;
        ids[size_t(t)] = int32_t(r);
        found = true;
      }
    }
  }
  return ids;
}

double fused_linear_tolerance(const FusedLinearParams& p) {
  // bf16 outputs round to 8 bits (2^-9 relative per element); fp32 accumulation over `in` terms
  // in another order drifts by ~in * 2^-24 at worst.
  const double sum = 1e-6 * std::sqrt(double(p.in));
  return (p.dtype == DType::kBF16 ? 1.5e-2 : 1e-5) + sum;
}

}  // namespace tunableop
