// The fp64 reference, Freivalds' check and the error measures every other GEMM test relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/gemm/reference.h"
#include "support/gemm_testing.h"

namespace tunableop {
namespace {

GemmParams make(DType dt, char ta, char tb, int64_t m, int64_t n, int64_t k) {
  GemmParams p;
  p.dtype = dt;
  p.transa = ta;
  p.transb = tb;
  p.m = m;
  p.n = n;
  p.k = k;
  return p.with_defaults();
}

TEST(GemmReference, HandComputedProducts) {
  // Column-major A (2 x 3) = [1 2 3; 4 5 6], B (3 x 2) = [1 0; 0 1; 1 1].
  std::vector<double> a = {1, 4, 2, 5, 3, 6};
  std::vector<double> b = {1, 0, 1, 0, 1, 1};
  GemmParams p = make(DType::kF64, 'N', 'N', 2, 2, 3);
  auto c = gemm_reference_f64(p, a.data(), b.data(), nullptr);
  EXPECT_EQ(c, (std::vector<double>{4, 10, 5, 11}));
  // The same product with both operands stored transposed.
  std::vector<double> at = {1, 2, 3, 4, 5, 6};  // 3 x 2, A^T
  std::vector<double> bt = {1, 0, 0, 1, 1, 1};  // 2 x 3, B^T
  GemmParams q = make(DType::kF64, 'T', 'T', 2, 2, 3);
  EXPECT_EQ(gemm_reference_f64(q, at.data(), bt.data(), nullptr), (std::vector<double>{4, 10, 5, 11}));
  // alpha and beta.
  std::vector<double> c0 = {1, 1, 1, 1};
  p.alpha = 2;
  p.beta = -1;
  EXPECT_EQ(gemm_reference_f64(p, a.data(), b.data(), c0.data()), (std::vector<double>{7, 19, 9, 21}));
}

TEST(GemmReference, GapsAreCopiedOrZeroAndBetaZeroIgnoresC) {
  GemmParams p = make(DType::kF64, 'N', 'N', 1, 2, 1);
  p.ldc = 3;
  p = p.with_defaults();
  std::vector<double> a = {2}, b = {3, 4};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> c_in = {nan, 7, 8, nan};  // c_span = 3 * 1 + 1 = 4
  ASSERT_EQ(p.c_span(), 4);
  auto out = gemm_reference_f64(p, a.data(), b.data(), c_in.data());
  EXPECT_EQ(out[0], 6);
  EXPECT_EQ(out[1], 7);  // gap copied
  EXPECT_EQ(out[2], 8);
  EXPECT_EQ(out[3], 8);
  auto zero = gemm_reference_f64(p, a.data(), b.data(), nullptr);
  EXPECT_EQ(zero, (std::vector<double>{6, 0, 0, 8}));
}

TEST(GemmReference, FreivaldsAcceptsCorrectAndRejectsWrong) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    for (const GemmParams& p : testing::random_gemm_shapes(dt, 21, 8, true, 40)) {
      SCOPED_TRACE(testing::describe(p));
      auto prob = testing::HostGemmProblem::random(p, 3);
      auto ref = gemm_reference_f64(p, prob.a.data(), prob.b.data(), prob.c_initial.data());
      std::vector<uint8_t> c = prob.c_initial;
      for (int64_t i = 0; i < p.c_span(); ++i) store_from_double(p.dtype, c.data(), i, ref[size_t(i)]);
      const void* c0 = p.beta != 0 ? prob.c_initial.data() : nullptr;
      double ok = freivalds_error(p, prob.a.data(), prob.b.data(), c0, c.data());
      EXPECT_LE(ok, gemm_tolerance(p));
      EXPECT_LE(relative_error(p, c.data(), ref), gemm_tolerance(p));
      // One wrong element in the last matrix of the batch.
      int64_t last = (p.batch - 1) * p.stride_c + (p.m - 1) + (p.n - 1) * p.ldc;
      store_from_double(p.dtype, c.data(), last, ref[size_t(last)] + 0.5);
      EXPECT_GT(freivalds_error(p, prob.a.data(), prob.b.data(), c0, c.data()), gemm_tolerance(p));
      EXPECT_GT(relative_error(p, c.data(), ref), gemm_tolerance(p));
      // NaN anywhere in C fails outright.
      store_from_double(p.dtype, c.data(), 0, std::numeric_limits<double>::quiet_NaN());
      EXPECT_TRUE(std::isinf(freivalds_error(p, prob.a.data(), prob.b.data(), c0, c.data())));
      EXPECT_TRUE(std::isinf(relative_error(p, c.data(), ref)));
    }
  }
}

// A 1 x 1 result that cancels (alpha a.b + beta c near 0; the fuzz finding
// fuzz/corpus/gemm_params/regress-cancel-1x1-beta.bin): a correct fp32 kernel's rounding error is
// proportional to the terms, not to the result, so both checks measure against the terms' scale.
TEST(GemmReference, CancellationIsMeasuredAgainstTheTerms) {
  GemmParams p = make(DType::kF32, 'T', 'N', 1, 1, 15);
  p.alpha = -1;
  p.beta = 0.5;
  std::vector<float> a(15), b(15);
  uint64_t x = 99;
  auto next = [&] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return float(double(x % 2001) / 1000.0 - 1.0);
  };
  for (size_t l = 0; l < a.size(); ++l) a[l] = next(), b[l] = next();
  double dot = 0;
  for (size_t l = 0; l < a.size(); ++l) dot += double(a[l]) * double(b[l]);
  const std::vector<float> c0 = {float(2 * dot)};  // beta c0 cancels alpha a.b up to c0's rounding
  // What a kernel computes: fp32 accumulation, then alpha and beta in fp32.
  float acc = 0;
  for (size_t l = 0; l < a.size(); ++l) acc += a[l] * b[l];
  std::vector<float> c = {-acc + 0.5f * c0[0]};
  std::vector<double> scale;
  const auto ref = gemm_reference_f64(p, a.data(), b.data(), c0.data(), &scale);
  ASSERT_LT(std::abs(ref[0]), 1e-6 * scale[0]) << "the data must cancel for this test to mean anything";
  EXPECT_LE(relative_error(p, c.data(), ref, scale), gemm_tolerance(p));
  EXPECT_LE(freivalds_error(p, a.data(), b.data(), c0.data(), c.data()), gemm_tolerance(p));
  // Dropping the largest term is still an O(1) error against the terms.
  size_t big = 0;
  for (size_t l = 1; l < a.size(); ++l)
    if (std::abs(a[l] * b[l]) > std::abs(a[big] * b[big])) big = l;
  c[0] += a[big] * b[big];
  EXPECT_GT(relative_error(p, c.data(), ref, scale), 1e-2);
  EXPECT_GT(freivalds_error(p, a.data(), b.data(), c0.data(), c.data()), 1e-2);
}

TEST(GemmReference, ToleranceDependsOnDtypeAndDepth) {
  GemmParams p = make(DType::kF32, 'N', 'N', 8, 8, 16);
  GemmParams deep = make(DType::kF32, 'N', 'N', 8, 8, 4096);
  EXPECT_GT(gemm_tolerance(deep), gemm_tolerance(p));
  double f64 = gemm_tolerance(make(DType::kF64, 'N', 'N', 8, 8, 16));
  double f32 = gemm_tolerance(p);
  double f16 = gemm_tolerance(make(DType::kF16, 'N', 'N', 8, 8, 16));
  double b16 = gemm_tolerance(make(DType::kBF16, 'N', 'N', 8, 8, 16));
  EXPECT_LT(f64, f32);
  EXPECT_LT(f32, f16);
  EXPECT_LT(f16, b16);
  EXPECT_LT(b16, 0.1) << "a wrong kernel (error O(1)) must still fail";
  GemmParams tf32 = p;
  tf32.allow_tf32 = true;
  EXPECT_GT(gemm_tolerance(tf32), f32);
}

TEST(GemmReference, LoadAndStoreEveryDtype) {
  for (DType dt : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    std::vector<uint8_t> buf(4 * dtype_size(dt));
    const double values[] = {1.5, -0.25, 0, 96};  // exact in every dtype
    for (int i = 0; i < 4; ++i) store_from_double(dt, buf.data(), i, values[i]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(load_as_double(dt, buf.data(), i), values[i]) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace tunableop
