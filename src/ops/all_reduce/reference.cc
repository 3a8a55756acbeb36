#include "ops/all_reduce/reference.h"

#include <cmath>
#include <limits>

#include "ops/framework/elements.h"

namespace tunableop {

std::vector<double> all_reduce_reference(const AllReduceParams& p, const std::vector<const void*>& inputs) {
  std::vector<double> sum(size_t(p.count), 0.0);
  for (const void* in : inputs)
    for (int64_t i = 0; i < p.count; ++i) sum[size_t(i)] += load_as_double(p.dtype, in, i);
  return sum;
}

double round_as(DType t, double v) {
  std::vector<uint8_t> one(8);
  store_from_double(t, one.data(), 0, double(float(v)));
  return load_as_double(t, one.data(), 0);
}

double all_reduce_tolerance(const AllReduceParams& p) {
  const double ranks = double(std::max(p.world_size, 1));
  // Into the residual: the sum's one rounding (round_to), relative to residual + sum.
  switch (p.adds_residual() ? (p.round_to == DType::kF32 ? p.dtype : p.round_to) : p.dtype) {
    case DType::kBF16: return 1e-2;  // one rounding to 8 bits of mantissa
    case DType::kF16: return 2e-3;
    case DType::kF32: return 1e-6 * ranks;
    case DType::kF64: return 1e-13 * ranks;
    case DType::kF8E4M3:
    case DType::kF8E5M2: break;  // validate refuses fp8
  }
  return 0;
}

double all_reduce_error(const AllReduceParams& p, const void* output, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < p.count; ++i) {
    const double got = load_as_double(p.output_dtype(), output, i), want = ref[size_t(i)];
    if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();
    num += (got - want) * (got - want);
    den += want * want;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace tunableop
