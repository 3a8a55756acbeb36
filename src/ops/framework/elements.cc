#include "ops/framework/elements.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tunableop/fp8.h"
#include "tunableop/half.h"

namespace tunableop {

double load_as_double(DType dtype, const void* base, int64_t idx) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(base)[idx];
    case DType::kF64: return static_cast<const double*>(base)[idx];
    case DType::kBF16: return to_float(static_cast<const bf16*>(base)[idx]);
    case DType::kF16: return to_float(static_cast<const fp16*>(base)[idx]);
    case DType::kF8E4M3: return to_float(static_cast<const fp8_e4m3*>(base)[idx]);
    case DType::kF8E5M2: return to_float(static_cast<const fp8_e5m2*>(base)[idx]);
  }
  return 0;
}

void store_from_double(DType dtype, void* base, int64_t idx, double v) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(base)[idx] = float(v); break;
    case DType::kF64: static_cast<double*>(base)[idx] = v; break;
    case DType::kBF16: static_cast<bf16*>(base)[idx] = to_bf16(float(v)); break;
    case DType::kF16: static_cast<fp16*>(base)[idx] = to_fp16(float(v)); break;
    // Saturating (tunableop/fp8.h): random operands and quantized values never become NaN.
    case DType::kF8E4M3: static_cast<fp8_e4m3*>(base)[idx] = to_fp8_e4m3(float(v)); break;
    case DType::kF8E5M2: static_cast<fp8_e5m2*>(base)[idx] = to_fp8_e5m2(float(v)); break;
  }
}

namespace ops {

namespace {
int64_t span(const OutputLayout& o) {
  if (o.m == 0 || o.n == 0 || o.batch == 0) return 0;
  return (o.batch - 1) * o.stride + o.ld * (o.n - 1) + o.m;
}
}  // namespace

double layout_error(const OutputLayout& o, const void* data, const std::vector<double>& ref,
                    const std::vector<double>* scale) {
  double num = 0, den = 0, den_scale = 0;
  for (int64_t bt = 0; bt < o.batch; ++bt) {
    for (int64_t j = 0; j < o.n; ++j) {
      for (int64_t i = 0; i < o.m; ++i) {
        const int64_t e = bt * o.stride + i + j * o.ld;
        const double v = load_as_double(o.dtype, data, e);
        if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
        const double d = v - ref[size_t(e)];
        num += d * d;
        den += ref[size_t(e)] * ref[size_t(e)];
        if (scale) den_scale += (*scale)[size_t(e)] * (*scale)[size_t(e)];
      }
    }
  }
  den = std::max(den, den_scale);
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

std::vector<double> layout_to_double(const OutputLayout& o, const void* data) {
  std::vector<double> out(size_t(span(o)), 0.0);
  for (int64_t bt = 0; bt < o.batch; ++bt)
    for (int64_t j = 0; j < o.n; ++j)
      for (int64_t i = 0; i < o.m; ++i) {
        const int64_t e = bt * o.stride + i + j * o.ld;
        out[size_t(e)] = load_as_double(o.dtype, data, e);
      }
  return out;
}

}  // namespace ops
}  // namespace tunableop
