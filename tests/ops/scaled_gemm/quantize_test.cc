// The host fp8 quantizer: where the scales put each row's largest magnitude, the rounding
// error it leaves, and that its rowwise scales are exactly ScaledGemm's in the "tn" layout.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/scaled_gemm/reference.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop {
namespace {

std::vector<float> random_matrix(int64_t rows, int64_t cols, int64_t ld, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<float> mag(0.0f, 2.0f);  // magnitudes over several decades
  std::vector<float> x(size_t(rows * ld), 1e30f);      // gap elements: never read
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) x[size_t(r * ld + c)] = (rng() % 2 ? -1.0f : 1.0f) * mag(rng) * float(r + 1);
  return x;
}

class Quantize : public ::testing::TestWithParam<DType> {};

TEST_P(Quantize, RowwiseMapsEachRowsAmaxOntoTheMaxAndRoundsOnce) {
  const DType t = GetParam();
  const int64_t rows = 9, cols = 37, ldx = 41, ldq = 40;
  const std::vector<float> x = random_matrix(rows, cols, ldx, 3);
  std::vector<uint8_t> q(size_t(rows * ldq), 0xAB);
  std::vector<float> scales(static_cast<size_t>(rows)), back(static_cast<size_t>(rows * ldx), 0);
  ASSERT_TRUE(quantize_fp8(t, ScaleMode::kRowwise, rows, cols, x.data(), ldx, q.data(), ldq, scales.data()).is_ok());
  ASSERT_TRUE(
      dequantize_fp8(t, ScaleMode::kRowwise, rows, cols, q.data(), ldq, scales.data(), back.data(), ldx).is_ok());
  const double u = fp8_unit_roundoff(t), top = fp8_max(t);
  for (int64_t r = 0; r < rows; ++r) {
    double amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, double(std::fabs(x[size_t(r * ldx + c)])));
    EXPECT_NEAR(double(scales[size_t(r)]), amax / top, 1e-6 * amax / top) << "row " << r;
    // The smallest normal of the type, in x's units: below it steps are absolute.
    const double normal_floor = double(scales[size_t(r)]) * (t == DType::kF8E4M3 ? 0x1p-6 : 0x1p-14);
    for (int64_t c = 0; c < cols; ++c) {
      const double v = x[size_t(r * ldx + c)], w = back[size_t(r * ldx + c)];
      const double bound = std::max(u * std::fabs(v), u * normal_floor) * (1 + 1e-6) + 1e-7 * std::fabs(v);
      EXPECT_LE(std::fabs(v - w), bound) << "element [" << r << "," << c << "] " << v << " -> " << w;
    }
    for (int64_t c = cols; c < ldq; ++c) EXPECT_EQ(q[size_t(r * ldq + c)], 0xAB) << "gap written";
  }
}

TEST_P(Quantize, TensorwiseUsesOneScaleAndZerosGetScaleOne) {
  const DType t = GetParam();
  std::vector<float> x = random_matrix(4, 6, 6, 5);
  std::vector<uint8_t> q(24);
  float scale = 0;
  ASSERT_TRUE(quantize_fp8(t, ScaleMode::kTensorwise, 4, 6, x.data(), 6, q.data(), 6, &scale).is_ok());
  double amax = 0;
  for (float v : x) amax = std::max(amax, double(std::fabs(v)));
  EXPECT_NEAR(scale, amax / fp8_max(t), 1e-6 * amax / fp8_max(t));

  std::vector<float> zeros(12, 0.0f), scales(2, -1);
  ASSERT_TRUE(quantize_fp8(t, ScaleMode::kRowwise, 2, 6, zeros.data(), 6, q.data(), 6, scales.data()).is_ok());
  EXPECT_EQ(scales[0], 1.0f);
  EXPECT_EQ(scales[1], 1.0f);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(q[size_t(i)] & 0x7f, 0) << i;
}

TEST_P(Quantize, RefusesNonFiniteValuesAndBadShapes) {
  const DType t = GetParam();
  std::vector<float> x(6, 1.0f);
  x[4] = std::nanf("");
  std::vector<uint8_t> q(6);
  float s[2];
  Status st = quantize_fp8(t, ScaleMode::kRowwise, 2, 3, x.data(), 3, q.data(), 3, s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("[1, 1]"), std::string::npos) << st.message();
  x[4] = INFINITY;
  EXPECT_FALSE(quantize_fp8(t, ScaleMode::kRowwise, 2, 3, x.data(), 3, q.data(), 3, s).is_ok());
  EXPECT_FALSE(quantize_fp8(t, ScaleMode::kRowwise, 2, 3, x.data(), 2, q.data(), 3, s).is_ok());
  EXPECT_FALSE(quantize_fp8(DType::kBF16, ScaleMode::kRowwise, 2, 3, x.data(), 3, q.data(), 3, s).is_ok());
  EXPECT_FALSE(dequantize_fp8(t, ScaleMode::kRowwise, -1, 3, q.data(), 3, s, x.data(), 3).is_ok());
}

INSTANTIATE_TEST_SUITE_P(Types, Quantize, ::testing::Values(DType::kF8E4M3, DType::kF8E5M2),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// y = x W^T with W [out, in] and x [tokens, in] quantized rowwise is the "tn" ScaledGemm with
// scale_a = W's row scales and scale_b = x's: the reference reproduces the fp32 product to within
// the quantization error.
TEST(QuantizeIntoScaledGemm, RowwiseScalesAreTheOpsScales) {
  const int64_t tokens = 5, in = 64, out = 24;
  const std::vector<float> w = random_matrix(out, in, in, 11), x = random_matrix(tokens, in, in, 12);
  ScaledGemmParams p = scaled_linear_params(DType::kF8E4M3, DType::kF32, ScaleMode::kRowwise, tokens, in, out);
  std::vector<uint8_t> wq(size_t(out * in)), xq(size_t(tokens * in));
  std::vector<float> sw(static_cast<size_t>(out)), sx(static_cast<size_t>(tokens));
  ASSERT_TRUE(quantize_fp8(p.a_dtype, p.scale_mode, out, in, w.data(), in, wq.data(), in, sw.data()).is_ok());
  ASSERT_TRUE(quantize_fp8(p.b_dtype, p.scale_mode, tokens, in, x.data(), in, xq.data(), in, sx.data()).is_ok());
  ScaledGemmOperands o;
  o.a = wq.data(), o.b = xq.data(), o.scale_a = sw.data(), o.scale_b = sx.data();
  const std::vector<double> y = scaled_gemm_reference_f64(p, o);
  double num = 0, den = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < out; ++j) {
      double exact = 0;
      for (int64_t l = 0; l < in; ++l) exact += double(x[size_t(t * in + l)]) * double(w[size_t(j * in + l)]);
      const double d = y[size_t(j + t * out)] - exact;  // C column-major: row j (out), column t (token)
      num += d * d;
      den += exact * exact;
    }
  // Two roundings of relative size <= 2^-4 per product, averaging out over 64 terms.
  EXPECT_LT(std::sqrt(num / den), 2 * fp8_unit_roundoff(DType::kF8E4M3));
  EXPECT_GT(std::sqrt(num / den), 1e-4) << "suspiciously exact: were the inputs quantized at all?";
}

}  // namespace
}  // namespace tunableop
