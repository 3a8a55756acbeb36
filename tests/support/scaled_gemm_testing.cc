#include "support/scaled_gemm_testing.h"

#include <fmt/format.h>

#include <cmath>
#include <numeric>
#include <random>

#include "tunableop/op_tools.h"

namespace tunableop::testing {

namespace {
constexpr double kGapSentinel = 7.0;
}

HostScaledGemmProblem HostScaledGemmProblem::random(const ScaledGemmParams& params, uint64_t seed) {
  HostScaledGemmProblem h;
  h.p = params.with_defaults();
  const ScaledGemmParams& p = h.p;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0), s(0.25, 2.0);
  auto fill = [&](std::vector<uint8_t>& v, DType t, int64_t n) {
    v.assign(size_t(n) * dtype_size(t), 0);
    for (int64_t i = 0; i < n; ++i) store_from_double(t, v.data(), i, u(rng));
  };
  fill(h.a, p.a_dtype, p.a_span());
  fill(h.b, p.b_dtype, p.b_span());
  if (p.bias_dtype) fill(h.bias, *p.bias_dtype, p.m);
  for (auto [v, n] : {std::pair{&h.scale_a, p.scale_a_count()}, {&h.scale_b, p.scale_b_count()}}) {
    v->resize(size_t(n));
    for (float& x : *v) x = float(s(rng));
  }
  h.c.assign(size_t(p.c_span()) * dtype_size(p.out_dtype), 0);
  for (int64_t e = 0; e < p.c_span(); ++e)
    store_from_double(p.out_dtype, h.c.data(), e, e % p.ldc < p.m ? std::nan("") : kGapSentinel);
  return h;
}

ScaledGemmOperands HostScaledGemmProblem::inputs() const {
  ScaledGemmOperands o;
  o.a = a.data(), o.b = b.data(), o.scale_a = scale_a.data(), o.scale_b = scale_b.data();
  o.bias = p.bias_dtype ? bias.data() : nullptr;
  return o;
}

ScaledGemmOperands HostScaledGemmProblem::operands() {
  ScaledGemmOperands o = inputs();
  o.c = c.data();
  return o;
}

std::vector<ScaledGemmParams> random_scaled_gemm_shapes(uint64_t seed, int count, int64_t max_dim) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dim(1, max_dim), gap(0, 5);
  const DType fp8[] = {DType::kF8E4M3, DType::kF8E5M2};
  const DType out[] = {DType::kBF16, DType::kF16, DType::kF32};
  std::vector<ScaledGemmParams> v;
  for (int i = 0; i < count; ++i) {
    ScaledGemmParams p;
    p.a_dtype = fp8[rng() % 2];
    p.b_dtype = fp8[rng() % 2];
    p.out_dtype = out[rng() % 3];
    if (rng() % 2) p.bias_dtype = out[rng() % 3];
    p.scale_mode = rng() % 2 ? ScaleMode::kRowwise : ScaleMode::kTensorwise;
    p.transa = rng() % 2 ? 'T' : 'N';
    p.transb = rng() % 2 ? 'T' : 'N';
    p.m = dim(rng), p.n = dim(rng), p.k = dim(rng);
    p.lda = p.a_rows() + gap(rng), p.ldb = p.b_rows() + gap(rng), p.ldc = p.m + gap(rng);
    v.push_back(p.with_defaults());
  }
  return v;
}

ScaledGemmReference::ScaledGemmReference(const HostScaledGemmProblem& prob)
    : p_(prob.p), c_bytes_(prob.c.size()), cols_(size_t(prob.p.n)) {
  std::iota(cols_.begin(), cols_.end(), int64_t(0));
  ref_ = scaled_gemm_columns_f64(p_, prob.inputs(), cols_, &terms_);
}

double ScaledGemmReference::error(const std::vector<uint8_t>& c_out) const {
  return scaled_gemm_columns_error(p_, c_out.data(), cols_, ref_, terms_);
}

::testing::AssertionResult ScaledGemmReference::matches(const std::vector<uint8_t>& c_out, double tol) const {
  if (c_out.size() != c_bytes_) return ::testing::AssertionFailure() << "C has the wrong size";
  for (int64_t e = 0; e < p_.c_span(); ++e)
    if (e % p_.ldc >= p_.m && load_as_double(p_.out_dtype, c_out.data(), e) != kGapSentinel)
      return ::testing::AssertionFailure() << "ld gap element " << e << " was written (" << describe(p_) << ")";
  const double limit = tol > 0 ? tol : scaled_gemm_tolerance(p_);
  const double err = error(c_out);
  if (!(err <= limit))
    return ::testing::AssertionFailure() << "relative error " << err << " > " << limit << " (" << describe(p_) << ")";
  return ::testing::AssertionSuccess() << "relative error " << err;
}

::testing::AssertionResult matches_reference(const HostScaledGemmProblem& prob, const std::vector<uint8_t>& c_out,
                                             double tol) {
  return ScaledGemmReference(prob).matches(c_out, tol);
}

double reference_error(const HostScaledGemmProblem& prob, const std::vector<uint8_t>& c_out) {
  return ScaledGemmReference(prob).error(c_out);
}

std::string describe(const ScaledGemmParams& p) {
  return fmt::format("{},{}", scaled_gemm_op_signature(p), scaled_gemm_params_signature(p));
}

}  // namespace tunableop::testing
