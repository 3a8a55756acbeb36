// ScaledGemm's fp64 reference and its tolerance: the reference against a naive product of the
// dequantized matrices; the tolerance accepts what a correct kernel does (one rounding of the
// output, FP8 tensor cores' fast accumulation) and rejects one fp8 rounding too many.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "support/scaled_gemm_testing.h"
#include "tunableop/fp8.h"
#include "tunableop/op_tools.h"

namespace tunableop {
namespace {

using testing::HostScaledGemmProblem;

// C from the reference, transformed per element by `f(i, j, exact)`, rounded to the output type.
template <class F>
std::vector<uint8_t> output_from(const HostScaledGemmProblem& h, F f) {
  const ScaledGemmParams& p = h.p;
  const std::vector<double> ref = scaled_gemm_reference_f64(p, h.inputs());
  std::vector<uint8_t> c = h.c;
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t i = 0; i < p.m; ++i)
      store_from_double(p.out_dtype, c.data(), i + j * p.ldc, f(i, j, ref[size_t(i + j * p.ldc)]));
  return c;
}

TEST(ScaledGemmReference, IsTheProductOfTheDequantizedMatrices) {
  for (const ScaledGemmParams& shape : testing::random_scaled_gemm_shapes(1, 40)) {
    const HostScaledGemmProblem h = HostScaledGemmProblem::random(shape, 2);
    const ScaledGemmParams& p = h.p;
    const std::vector<double> ref = scaled_gemm_reference_f64(p, h.inputs());
    const bool rowwise = p.scale_mode == ScaleMode::kRowwise;
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t i = 0; i < p.m; ++i) {
        double acc = 0;
        for (int64_t l = 0; l < p.k; ++l) {
          const double a = load_as_double(p.a_dtype, h.a.data(), p.transa == 'N' ? i + l * p.lda : l + i * p.lda);
          const double b = load_as_double(p.b_dtype, h.b.data(), p.transb == 'N' ? l + j * p.ldb : j + l * p.ldb);
          acc += (a * h.scale_a[size_t(rowwise ? i : 0)]) * (b * h.scale_b[size_t(rowwise ? j : 0)]);
        }
        if (p.bias_dtype) acc += load_as_double(*p.bias_dtype, h.bias.data(), i);
        ASSERT_NEAR(ref[size_t(i + j * p.ldc)], acc, 1e-12 * (1 + std::fabs(acc))) << testing::describe(p);
      }
  }
}

TEST(ScaledGemmReference, ACorrectlyRoundedOutputPassesAndLeavesGapsAlone) {
  for (const ScaledGemmParams& shape : testing::random_scaled_gemm_shapes(3, 40)) {
    const HostScaledGemmProblem h = HostScaledGemmProblem::random(shape, 4);
    EXPECT_TRUE(testing::matches_reference(h, output_from(h, [](int64_t, int64_t, double v) { return v; })));
  }
}

// The tolerance is a function of the problem alone; what it is made of (docs/design.md).
TEST(ScaledGemmTolerance, StaysBelowOneMoreFp8RoundingForEveryK) {
  for (DType out : {DType::kBF16, DType::kF16, DType::kF32})
    for (int64_t k : {1, 16, 1000, 4096, 11008, 14336, 28672, 1 << 20}) {
      ScaledGemmParams p = scaled_linear_params(DType::kF8E4M3, out, ScaleMode::kRowwise, 8, k, 64);
      const double tol = scaled_gemm_tolerance(p);
      // One more e4m3 rounding of the output leaves a relative RMS error of u / sqrt(3).
      EXPECT_LE(tol, fp8_unit_roundoff(DType::kF8E4M3) / (2 * std::sqrt(3.0))) << k;
      // At least the output's own rounding, with room for two of them (the device check compares
      // two outputs).
      const double u_out = out == DType::kBF16 ? 0x1p-8 : out == DType::kF16 ? 0x1p-11 : 0x1p-24;
      EXPECT_GE(tol, std::min(2 * u_out, 0.018)) << k;
    }
}

// Hopper's FP8 tensor cores with fast accumulation keep about 14 bits of the running sum per
// 32-deep step (the DeepSeek-V3 report measured it): modelled here by truncating the partial sum
// to 14 significant bits after every 32 products. Such a kernel must pass at LLM sizes.
double truncate_bits(double v, int bits) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e;
  const double m = std::frexp(v, &e);
  return std::ldexp(std::trunc(std::ldexp(m, bits)), e - bits);
}

TEST(ScaledGemmTolerance, AcceptsFastAccumulation) {
  for (int64_t k : {256, 4096, 14336}) {
    ScaledGemmParams shape = scaled_linear_params(DType::kF8E4M3, DType::kBF16, ScaleMode::kRowwise, 3, k, 40);
    const HostScaledGemmProblem h = HostScaledGemmProblem::random(shape, 9);
    const ScaledGemmParams& p = h.p;
    std::vector<uint8_t> c = h.c;
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t i = 0; i < p.m; ++i) {
        double acc = 0, step = 0;
        for (int64_t l = 0; l < p.k; ++l) {
          step += load_as_double(p.a_dtype, h.a.data(), l + i * p.lda) *
                  load_as_double(p.b_dtype, h.b.data(), l + j * p.ldb);
          if ((l + 1) % 32 == 0 || l + 1 == p.k) acc = truncate_bits(acc + step, 14), step = 0;
        }
        store_from_double(p.out_dtype, c.data(), i + j * p.ldc, acc * h.scale_a[size_t(i)] * h.scale_b[size_t(j)]);
      }
    std::printf("k %lld: the fast-accumulation model's error %.3g, tolerance %.3g\n", (long long)k,
                testing::reference_error(h, c), scaled_gemm_tolerance(p));
    EXPECT_TRUE(testing::matches_reference(h, c)) << "k = " << k;
  }
}

TEST(ScaledGemmTolerance, RejectsWrongKernels) {
  for (DType out : {DType::kBF16, DType::kF32})
    for (ScaleMode mode : {ScaleMode::kTensorwise, ScaleMode::kRowwise}) {
      ScaledGemmParams shape = scaled_linear_params(DType::kF8E4M3, out, mode, 13, 2048, 96);
      shape.bias_dtype = DType::kBF16;
      HostScaledGemmProblem h = HostScaledGemmProblem::random(shape, 21);
      if (mode == ScaleMode::kTensorwise) h.scale_a = {1.5f}, h.scale_b = {0.6f};  // far from 1, as is their product
      const ScaledGemmParams& p = h.p;
      const ScaledGemmOperands in = h.inputs();
      const bool rw = mode == ScaleMode::kRowwise;
      const std::vector<double> no_bias = [&] {
        ScaledGemmParams q = p;
        q.bias_dtype.reset();
        return scaled_gemm_reference_f64(q, in);
      }();
      auto bias = [&](int64_t i) { return load_as_double(*p.bias_dtype, h.bias.data(), i); };
      // The output rounded to e4m3 once more (an fp8 intermediate).
      EXPECT_FALSE(testing::matches_reference(
          h, output_from(h, [](int64_t, int64_t, double v) { return double(to_float(to_fp8_e4m3(float(v)))); })));
      // Scales ignored, or A's scale applied twice.
      EXPECT_FALSE(testing::matches_reference(h, output_from(h, [&](int64_t i, int64_t j, double) {
                                                const double s = double(h.scale_a[size_t(rw ? i : 0)]) *
                                                                 h.scale_b[size_t(rw ? j : 0)];
                                                return no_bias[size_t(i + j * p.ldc)] / s + bias(i);
                                              })));
      EXPECT_FALSE(testing::matches_reference(h, output_from(h, [&](int64_t i, int64_t j, double v) {
                                                return (v - bias(i)) * h.scale_a[size_t(rw ? i : 0)] + bias(i);
                                              })));
      // Bias left out.
      EXPECT_FALSE(
          testing::matches_reference(h, output_from(h, [&](int64_t i, int64_t j, double v) { return v - bias(i); })));
      // One element left as it was (NaN).
      std::vector<uint8_t> c = output_from(h, [](int64_t, int64_t, double v) { return v; });
      store_from_double(p.out_dtype, c.data(), (p.n - 1) * p.ldc + p.m - 1, std::nan(""));
      EXPECT_FALSE(testing::matches_reference(h, c));
      if (rw) {
        // Rowwise scales applied the other way round (A's by column, B's by row).
        const int64_t n = std::min(p.m, p.n);
        EXPECT_FALSE(testing::matches_reference(h, output_from(h, [&](int64_t i, int64_t j, double v) {
                                                  if (i >= n || j >= n) return v;
                                                  return no_bias[size_t(i + j * p.ldc)] /
                                                             (h.scale_a[size_t(i)] * h.scale_b[size_t(j)]) *
                                                             h.scale_a[size_t(j)] * h.scale_b[size_t(i)] +
                                                         bias(i);
                                                })));
      }
    }
}

}  // namespace
}  // namespace tunableop
