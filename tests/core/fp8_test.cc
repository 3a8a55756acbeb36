// tunableop/fp8.h against an independent model of the formats: every bit pattern decoded from
// its definition, and rounding as "the nearest of all finite values, ties to the even pattern,
// beyond the largest finite value saturate".
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tunableop/fp8.h"
#include "tunableop/types.h"

namespace tunableop {
namespace {

struct Format {
  int exp_bits, man_bits, bias;
  bool has_inf;
  float max;
};
constexpr Format kE4M3{4, 3, 7, false, 448.0f};
constexpr Format kE5M2{5, 2, 15, true, 57344.0f};

// The value of a bit pattern from the format's definition (NaN for NaN, +-inf for inf).
double model_value(const Format& f, int bits) {
  const int sign = bits >> 7, e = (bits >> f.man_bits) & ((1 << f.exp_bits) - 1), m = bits & ((1 << f.man_bits) - 1);
  const int top = (1 << f.exp_bits) - 1;
  if (f.has_inf && e == top) return m == 0 ? (sign ? -INFINITY : INFINITY) : NAN;
  if (!f.has_inf && e == top && m == (1 << f.man_bits) - 1) return NAN;
  const double frac = e == 0 ? m / double(1 << f.man_bits) : 1.0 + m / double(1 << f.man_bits);
  const double v = std::ldexp(frac, (e == 0 ? 1 : e) - f.bias);
  return sign ? -v : v;
}

// Round-to-nearest-even by search over every finite pattern; saturating.
int model_round(const Format& f, float x) {
  if (std::isnan(x)) return -1;  // any NaN
  if (std::isinf(x) || std::fabs(x) > f.max) x = std::copysign(f.max, x);
  int best = -1;
  double best_d = INFINITY;
  for (int b = 0; b < 256; ++b) {
    const double v = model_value(f, b);
    if (!std::isfinite(v) || std::signbit(v) != std::signbit(x)) continue;
    const double d = std::fabs(v - double(x));
    if (d < best_d || (d == best_d && (b & 1) == 0)) best_d = d, best = b;
  }
  return best;
}

float decode(const Format& f, int b) {
  return f.has_inf ? to_float(fp8_e5m2{uint8_t(b)}) : to_float(fp8_e4m3{uint8_t(b)});
}
int encode(const Format& f, float x) { return f.has_inf ? to_fp8_e5m2(x).bits : to_fp8_e4m3(x).bits; }

class Fp8 : public ::testing::TestWithParam<Format> {};

TEST_P(Fp8, EveryPatternDecodesAsTheFormatDefines) {
  const Format f = GetParam();
  for (int b = 0; b < 256; ++b) {
    const double want = model_value(f, b);
    const float got = decode(f, b);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else {
      EXPECT_EQ(double(got), want) << "pattern " << b;
      EXPECT_EQ(std::signbit(got), bool(b & 0x80)) << "sign of pattern " << b;
    }
  }
  EXPECT_EQ(decode(f, 0x7e - (f.has_inf ? 3 : 0)), f.max);
}

TEST_P(Fp8, FiniteValuesRoundTripExactly) {
  const Format f = GetParam();
  for (int b = 0; b < 256; ++b) {
    const float v = decode(f, b);
    if (std::isfinite(v)) {
      EXPECT_EQ(encode(f, v), b) << "pattern " << b;
    }
  }
}

TEST_P(Fp8, RoundsToNearestEvenAndSaturates) {
  const Format f = GetParam();
  std::vector<float> xs;
  // Every midpoint and quarter point between neighbouring finite values (the ties and the
  // cases either side of them), subnormals included, and values far out.
  std::vector<float> finite;
  for (int b = 0; b < 128; ++b)
    if (std::isfinite(decode(f, b))) finite.push_back(decode(f, b));
  std::sort(finite.begin(), finite.end());
  for (size_t i = 0; i + 1 < finite.size(); ++i)
    for (double t : {0.25, 0.5, 0.75, 0.4999, 0.5001}) xs.push_back(float(finite[i] + t * (finite[i + 1] - finite[i])));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.2f * f.max, 1.2f * f.max);
  for (int i = 0; i < 20000; ++i) xs.push_back(u(rng));
  for (float x : {1e-30f, 1e-7f, 1e30f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), f.max * 1.03f, f.max * 1.0625f, f.max * 2})
    xs.push_back(x);
  for (float x : std::vector<float>(xs)) xs.push_back(-x);
  for (float x : xs) EXPECT_EQ(encode(f, x), model_round(f, x)) << "x = " << x;
}

TEST_P(Fp8, NanStaysNanAndInfSaturates) {
  const Format f = GetParam();
  EXPECT_TRUE(std::isnan(decode(f, encode(f, std::nanf("")))));
  EXPECT_EQ(decode(f, encode(f, INFINITY)), f.max);
  EXPECT_EQ(decode(f, encode(f, -INFINITY)), -f.max);
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8, ::testing::Values(kE4M3, kE5M2),
                         [](const auto& info) { return info.param.has_inf ? "e5m2" : "e4m3"; });

TEST(Fp8DType, NamesSizesAndParsing) {
  EXPECT_EQ(dtype_size(DType::kF8E4M3), 1u);
  EXPECT_EQ(dtype_size(DType::kF8E5M2), 1u);
  EXPECT_STREQ(dtype_torch_name(DType::kF8E4M3), "Float8_e4m3fn");
  EXPECT_STREQ(dtype_torch_name(DType::kF8E5M2), "Float8_e5m2");
  for (const char* s : {"fp8_e4m3", "Float8_e4m3fn", "e4m3", "fp8"})
    EXPECT_EQ(*parse_fp8_dtype(s), DType::kF8E4M3) << s;
  for (const char* s : {"fp8_e5m2", "Float8_e5m2", "e5m2"}) EXPECT_EQ(*parse_fp8_dtype(s), DType::kF8E5M2) << s;
  EXPECT_FALSE(parse_fp8_dtype("bf16").is_ok());
  // Every other op computes in a dtype: parse_dtype never hands one an fp8 type, and says why.
  auto st = parse_dtype("fp8_e4m3");
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.status().message().find("ScaledGemm"), std::string::npos) << st.status().message();
  EXPECT_TRUE(is_fp8(DType::kF8E5M2));
  EXPECT_FALSE(is_fp8(DType::kBF16));
}

}  // namespace
}  // namespace tunableop
