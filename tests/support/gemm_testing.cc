#include "support/gemm_testing.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>

namespace tunableop::testing {

namespace {
constexpr double kSentinel = 12288.0;  // 1.5 * 2^13: exact in fp64, fp32, bf16 and fp16

bool in_matrix(const GemmParams& p, int64_t idx) {
  int64_t b = idx / p.stride_c, r = idx % p.stride_c;
  if (b >= p.batch) return false;
  int64_t j = r / p.ldc, i = r % p.ldc;
  return i < p.m && j < p.n;
}
}  // namespace

HostGemmProblem HostGemmProblem::random(const GemmParams& params, uint64_t seed) {
  HostGemmProblem prob;
  prob.p = params.with_defaults();
  const GemmParams& p = prob.p;
  size_t es = dtype_size(p.dtype);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  prob.a.resize(size_t(p.a_span()) * es);
  prob.b.resize(size_t(p.b_span()) * es);
  prob.c.resize(size_t(p.c_span()) * dtype_size(p.c_dtype()));
  for (int64_t i = 0; i < p.a_span(); ++i) store_from_double(p.dtype, prob.a.data(), i, dist(rng));
  for (int64_t i = 0; i < p.b_span(); ++i) store_from_double(p.dtype, prob.b.data(), i, dist(rng));
  for (int64_t i = 0; i < p.c_span(); ++i) {
    double v = !in_matrix(p, i) ? kSentinel : p.beta != 0.0 ? dist(rng) : std::numeric_limits<double>::quiet_NaN();
    store_from_double(p.c_dtype(), prob.c.data(), i, v);
  }
  prob.c_initial = prob.c;
  return prob;
}

std::vector<GemmParams> random_gemm_shapes(DType dtype, uint64_t seed, int count, bool with_batches, int64_t max_dim) {
  std::mt19937_64 rng(seed);
  auto dim = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::vector<GemmParams> out;
  const double alphas[] = {1.0, -0.5, 2.0};
  const double betas[] = {0.0, 1.0, -1.5};
  for (int t = 0; t < count; ++t) {
    GemmParams p;
    p.dtype = dtype;
    p.transa = (t & 1) ? 'T' : 'N';
    p.transb = (t & 2) ? 'T' : 'N';
    p.m = dim(1, max_dim);
    p.n = dim(1, max_dim);
    p.k = dim(1, max_dim);
    // Every third problem has leading dimensions larger than the rows.
    if (t % 3 == 2) {
      p.lda = p.a_rows() + dim(1, 7);
      p.ldb = p.b_rows() + dim(1, 7);
      p.ldc = p.m + dim(1, 7);
    }
    p.alpha = alphas[t % 3];
    p.beta = betas[(t / 3) % 3];
    if (with_batches && t % 4 == 3) {
      p.batch = dim(2, 4);
      if (t % 8 == 7) {  // non-dense strides: gaps between matrices
        GemmParams d = p.with_defaults();
        p.stride_a = d.stride_a + dim(1, 5);
        p.stride_b = d.stride_b + dim(1, 5);
        p.stride_c = d.stride_c + dim(1, 5);
      }
    }
    out.push_back(p.with_defaults());
  }
  return out;
}

::testing::AssertionResult matches_reference(const HostGemmProblem& prob, const std::vector<uint8_t>& c_out,
                                             double tol) {
  const GemmParams& p = prob.p;
  if (c_out.size() != prob.c_initial.size()) return ::testing::AssertionFailure() << "output size differs";
  auto ref = gemm_reference_f64(p, prob.a.data(), prob.b.data(), prob.c_initial.data());
  for (int64_t i = 0; i < p.c_span(); ++i) {
    if (in_matrix(p, i)) continue;
    double v = load_as_double(p.c_dtype(), c_out.data(), i);
    if (v != kSentinel)
      return ::testing::AssertionFailure()
             << describe(p) << ": element " << i << " outside C was written (" << v << ")";
  }
  double err = relative_error(p, c_out.data(), ref);
  double limit = tol > 0 ? tol : gemm_tolerance(p);
  if (!(err <= limit))
    return ::testing::AssertionFailure() << describe(p) << ": relative error " << err << " > " << limit;
  return ::testing::AssertionSuccess();
}

std::string describe(const GemmParams& p) {
  return fmt::format("{}{} {}{} m={} n={} k={} lda={} ldb={} ldc={} alpha={} beta={} batch={} strides={},{},{}",
                     dtype_name(p.dtype), p.widens() ? std::string("->") + dtype_name(p.c_dtype()) : "", p.transa,
                     p.transb, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.alpha, p.beta, p.batch, p.stride_a, p.stride_b,
                     p.stride_c);
}

}  // namespace tunableop::testing
