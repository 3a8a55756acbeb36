// FusedLinear (include/tunableop/fused_linear.h): params and their limits, the results-file
// signatures and their round trip, the fp64 reference against values worked out by hand, and
// the op definition the framework tunes through (buffers, binding, the CPU numerics check).
// Everything here runs without a GPU; the kernels are tested in tests/backends/cuda/fused_linear.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/fused_linear/definition.h"
#include "ops/fused_linear/reference.h"
#include "tunableop/fused_linear.h"
#include "tunableop/half.h"

namespace tunableop {
namespace {

FusedLinearParams make(DType dt, int64_t out, int64_t in, int64_t tokens, FusedInput input, FusedOutput output) {
  FusedLinearParams p;
  p.dtype = dt;
  p.out = out;
  p.in = in;
  p.tokens = tokens;
  p.input = input;
  p.output = output;
  return p;
}

TEST(FusedLinearParams, Limits) {
  EXPECT_TRUE(make(DType::kBF16, 2560, 2048, 1, FusedInput::kRmsNormPlusOne, FusedOutput::kStore).validate().is_ok());
  EXPECT_TRUE(make(DType::kF32, 7, 4, 8, FusedInput::kPlain, FusedOutput::kAddResidual).validate().is_ok());
  struct Bad {
    FusedLinearParams p;
    const char* says;
  };
  for (const Bad& b : {
           Bad{make(DType::kF16, 8, 64, 1, FusedInput::kPlain, FusedOutput::kStore), "fp32 or bf16"},
           Bad{make(DType::kBF16, 8, 64, 9, FusedInput::kPlain, FusedOutput::kStore), "tokens"},
           Bad{make(DType::kBF16, 8, 64, 0, FusedInput::kPlain, FusedOutput::kStore), "tokens"},
           Bad{make(DType::kBF16, 8, 60, 1, FusedInput::kPlain, FusedOutput::kStore), "16 bytes"},
           Bad{make(DType::kBF16, 0, 64, 1, FusedInput::kPlain, FusedOutput::kStore), "out"},
           Bad{make(DType::kBF16, 9, 64, 1, FusedInput::kRmsNorm, FusedOutput::kGatedSilu), "even"},
           Bad{make(DType::kBF16, 8, 16384, 8, FusedInput::kRmsNorm, FusedOutput::kStore), "shared memory"},
           // Sizes whose byte counts wrap (W of out x in, in x 2 bytes) are refused, not wrapped.
           Bad{make(DType::kBF16, 8, int64_t(1) << 62, 1, FusedInput::kPlain, FusedOutput::kStore), "16 bytes"},
           Bad{make(DType::kBF16, 1 << 30, int64_t(1) << 40, 1, FusedInput::kPlain, FusedOutput::kStore),
               "64-bit size"},
           Bad{make(DType::kF32, 8, int64_t(1) << 60, 8, FusedInput::kPlain, FusedOutput::kStore), "64-bit size"},
       }) {
    Status st = b.p.validate();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << fused_linear_params_signature(b.p);
    EXPECT_NE(st.message().find(b.says), std::string::npos) << st.message();
  }
  FusedLinearParams e = make(DType::kBF16, 8, 64, 1, FusedInput::kRmsNorm, FusedOutput::kStore);
  e.eps = 0;
  EXPECT_FALSE(e.validate().is_ok()) << "a norm needs eps > 0";
}

TEST(FusedLinearSignature, LayoutAndRoundTrip) {
  FusedLinearParams p = make(DType::kBF16, 2560, 2048, 1, FusedInput::kRmsNormPlusOne, FusedOutput::kStore);
  EXPECT_EQ(fused_linear_op_signature(p), "FusedLinearTunableOp_BFloat16");
  EXPECT_EQ(fused_linear_params_signature(p), "out_2560_tokens_1_in_2048_input_2_eps_1e-06_output_0");
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int in = 0; in < 3; ++in) {
      for (int out = 0; out < 6; ++out) {
        FusedLinearParams q = make(dt, 32000, 4096, 3, FusedInput(in), FusedOutput(out));
        q.eps = 1e-5;
        auto r = parse_fused_linear_signature(fused_linear_op_signature(q), fused_linear_params_signature(q));
        ASSERT_TRUE(r.is_ok()) << r.status().to_string();
        EXPECT_EQ(fused_linear_params_signature(*r), fused_linear_params_signature(q));
        EXPECT_EQ(r->dtype, dt);
        EXPECT_EQ(r->output, FusedOutput(out));
        if (q.norm()) {
          EXPECT_DOUBLE_EQ(r->eps, 1e-5);
        }
      }
    }
  }
  for (auto [op, params] : std::vector<std::pair<std::string, std::string>>{
           {"GemmTunableOp_BFloat16", "out_8_tokens_1_in_64_input_0_eps_0_output_0"},
           {"FusedLinearTunableOp_Int", "out_8_tokens_1_in_64_input_0_eps_0_output_0"},
           {"FusedLinearTunableOp_float", "out_8_tokens_1_in_64_input_0_eps_0"},
           {"FusedLinearTunableOp_float", "out_8_tokens_1_in_64_input_7_eps_0_output_0"},
           {"FusedLinearTunableOp_float", "out_8_tokens_9_in_64_input_0_eps_0_output_0"},
           {"FusedLinearTunableOp_float", "out_x_tokens_1_in_64_input_0_eps_0_output_0"},
           {"FusedLinearTunableOp_float", "out_8_tokens_1_in_64_input_0_eps_0_output_0_extra"},
           // Beyond int64 (strtoll saturated to INT64_MAX), and a W whose bytes wrap: a line of
           // an untuned file must not size a buffer from a wrapped count.
           {"FusedLinearTunableOp_float", "out_8_tokens_1_in_99999999999999999999_input_0_eps_0_output_0"},
           {"FusedLinearTunableOp_float", "out_1073741824_tokens_1_in_1099511627776_input_0_eps_0_output_0"},
       }) {
    auto r = parse_fused_linear_signature(op, params);
    EXPECT_EQ(r.status().code(), StatusCode::kParseError) << op << "," << params;
  }
}

// One token, hand-worked: x = [3, 4] (rms = sqrt(12.5)), norm w = [1, 0] (Gemma: 1 + w),
// W = [[1, 1], [2, -1], [0.5, 0], [1, 2]], fp32.
TEST(FusedLinearReference, WorkedByHand) {
  const float x[] = {3, 4}, nw[] = {1, 0}, w[] = {1, 1, 2, -1, 0.5f, 0, 1, 2}, res[] = {10, 20, 30, 40};
  FusedLinearParams p = make(DType::kF32, 4, 2, 1, FusedInput::kRmsNormPlusOne, FusedOutput::kStore);
  p.eps = 1e-6;
  const double inv = 1 / std::sqrt(12.5 + 1e-6);
  const double b0 = float(3 * inv * 2), b1 = float(4 * inv * 1);  // (1 + w) = 2, 1; rounded to fp32
  auto y = fused_linear_reference_f64(p, w, nullptr, x, nw, nullptr);
  ASSERT_EQ(y.size(), 4u);
  EXPECT_DOUBLE_EQ(y[0], b0 + b1);
  EXPECT_DOUBLE_EQ(y[1], 2 * b0 - b1);
  EXPECT_DOUBLE_EQ(y[2], 0.5 * b0);
  EXPECT_DOUBLE_EQ(y[3], b0 + 2 * b1);

  p.output = FusedOutput::kAddResidual;
  auto r = fused_linear_reference_f64(p, w, nullptr, x, nw, res);
  EXPECT_DOUBLE_EQ(r[1], 20 + double(float(2 * b0 - b1)));

  p.output = FusedOutput::kGatedSilu;  // gate rows 0, 1; up rows 2, 3
  auto g = fused_linear_reference_f64(p, w, nullptr, x, nw, nullptr);
  ASSERT_EQ(g.size(), 2u);
  const double g0 = float(b0 + b1);
  EXPECT_NEAR(g[0], g0 / (1 + std::exp(-g0)) * double(float(0.5 * b0)), 1e-12);

  p.input = FusedInput::kPlain;  // the input as given (bf16 rounding does not apply to fp32)
  p.output = FusedOutput::kStore;
  const float in[] = {1, 2};
  auto plain = fused_linear_reference_f64(p, w, in, nullptr, nullptr, nullptr);
  EXPECT_DOUBLE_EQ(plain[3], 5);

  const float logits[] = {1, 7, 7, -2, /*token 1*/ NAN, NAN, -1, NAN};
  FusedLinearParams a = make(DType::kF32, 4, 4, 2, FusedInput::kPlain, FusedOutput::kArgmax);
  EXPECT_EQ(fused_linear_argmax(a, logits), (std::vector<int32_t>{1, 2}));  // first of a tie; NaN skipped
}

TEST(FusedLinearReference, Bf16RoundsTheNormalisedInput) {
  // x = [1, 1]: rms 1, so the normalised input is w itself times 1/sqrt(1 + eps), rounded to bf16.
  const bf16 nw[] = {to_bf16(1.0f), to_bf16(1.0f)}, w[] = {to_bf16(1.0f), to_bf16(0.0f)};
  const float x[] = {1, 1};
  FusedLinearParams p = make(DType::kBF16, 1, 2, 1, FusedInput::kRmsNorm, FusedOutput::kStore);
  p.eps = 1e-2;  // 1/sqrt(1.01) = 0.995037..., bf16 0.99609375
  auto y = fused_linear_reference_f64(p, w, nullptr, x, nw, nullptr);
  EXPECT_DOUBLE_EQ(y[0], 0.99609375);
}

// The definition as the tuning problem uses it: buffers in order, binding back to operands,
// sources in the same order, and the CPU check: 0 on the reference itself, +inf on NaN.
TEST(FusedLinearDefinition, BuffersBindAndCheck) {
  using Def = ops::OpDefinition<FusedLinearOp>;
  FusedLinearParams p = make(DType::kF32, 6, 4, 2, FusedInput::kRmsNorm, FusedOutput::kAddResidual);
  auto b = Def::buffers(p);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_STREQ(b[0].name, "W");
  EXPECT_STREQ(b[1].name, "x");
  EXPECT_STREQ(b[3].name, "residual");
  EXPECT_EQ(b[3].role, ops::BufferSpec::Role::kInputOutput);
  std::vector<float> w(24), x(8), nw(4), res(12);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 5) - 2;
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) + 1;
  for (size_t i = 0; i < nw.size(); ++i) nw[i] = 0.5f + float(i);
  for (size_t i = 0; i < res.size(); ++i) res[i] = float(i);
  std::vector<void*> ptrs = {w.data(), x.data(), nw.data(), res.data()};
  FusedLinearOperands o = Def::bind(p, ops::BoundBuffers{ptrs, nullptr, nullptr, 0});
  EXPECT_EQ(o.residual, res.data());
  EXPECT_EQ(Def::sources(p, o), (std::vector<const void*>{w.data(), x.data(), nw.data(), res.data()}));
  // Pointers this form does not read change nothing: the params decide the list (a caller may
  // fill every field of the operands struct).
  FusedLinearOperands all = o;
  float unused[4] = {};
  all.input = unused, all.y = unused, all.gated = unused, all.ids = reinterpret_cast<int32_t*>(unused);
  EXPECT_EQ(Def::sources(p, all), Def::sources(p, o));
  EXPECT_TRUE(Def::check_operands(p, o).is_ok());
  o.x = nullptr;
  EXPECT_FALSE(Def::check_operands(p, o).is_ok());
  const ops::HostCheck check = Def::host_check(p, {w.data(), x.data(), nw.data(), res.data()});
  auto ref = fused_linear_reference_f64(p, w.data(), nullptr, x.data(), nw.data(), res.data());
  std::vector<float> good(ref.begin(), ref.end());
  EXPECT_LT(check(good.data()), 1e-6);
  good[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isinf(check(good.data())));

  FusedLinearParams g = make(DType::kBF16, 8, 8, 1, FusedInput::kPlain, FusedOutput::kArgmax);
  auto gb = Def::buffers(g);
  ASSERT_EQ(gb.size(), 4u);  // W, input, y, ids
  EXPECT_EQ(Def::output(g).buffer, 2u);
  EXPECT_EQ(Def::output(g).m, 8);
  EXPECT_EQ(Def::key(g), Def::key(g));
  FusedLinearParams h = g;
  h.tokens = 2;
  EXPECT_FALSE(Def::key(g) == Def::key(h));
}

}  // namespace
}  // namespace tunableop
