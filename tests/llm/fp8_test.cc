// --dtype fp8 on the CPU side (docs/llm.md, "FP8"): the scale rule the CUDA kernels share with the
// host quantizer, the option's refusals, LinearOp's ScaledGemm problems, and fp8 rounding
// simulated on the CPU engine over the Hugging Face fixtures: weights per output channel and
// projection inputs per token, rounded to e4m3 exactly as the CUDA engine rounds them, held to
// the thresholds the CUDA fp8 engine is held to (the GPU adds only bf16 rounding around them).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "fp8_accuracy.h"
#include "llm/engine.h"
#include "llm/engine_dtype.h"
#include "llm/fp8_scale.h"
#include "llm/linear_op.h"
#include "llm/weights.h"
#include "llm_test_util.h"
#include "tunableop/context.h"
#include "tunableop/fp8.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop::llm {
namespace {

// x rounded through e4m3 rowwise (quantize then dequantize: what the GEMM multiplies).
std::vector<float> round_rows_e4m3(const float* x, int64_t rows, int64_t cols) {
  std::vector<uint8_t> q(size_t(rows * cols));
  std::vector<float> scales(static_cast<size_t>(rows)), out(size_t(rows * cols));
  Status st = quantize_fp8(DType::kF8E4M3, ScaleMode::kRowwise, rows, cols, x, cols, q.data(), cols, scales.data());
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  st = dequantize_fp8(DType::kF8E4M3, ScaleMode::kRowwise, rows, cols, q.data(), cols, scales.data(), out.data(), cols);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return out;
}

// Per output channel (a weight's row): the scale is amax / 448 (the largest magnitude lands on
// 448 exactly, never on NaN), zero rows get scale 1, a tiny row FLT_MIN, a non-finite row NaN;
// the finite rows' scales are the host quantizer's, bit for bit.
TEST(Fp8Scale, PerChannelRuleMatchesTheHostQuantizer) {
  std::mt19937_64 rng(5);
  std::lognormal_distribution<float> mag(0.0f, 3.0f);
  const int64_t rows = 7, cols = 33;
  std::vector<float> w(size_t(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = (rng() % 2 ? -1.0f : 1.0f) * mag(rng) * 1e-2f;
  for (int64_t c = 0; c < cols; ++c) w[size_t(2 * cols + c)] = 0.0f;    // an all-zero row
  for (int64_t c = 0; c < cols; ++c) w[size_t(3 * cols + c)] = 1e-43f;  // subnormal amax
  w[size_t(4 * cols + 5)] = 3e38f;                                      // huge amax
  std::vector<uint8_t> q(w.size());
  std::vector<float> scales(static_cast<size_t>(rows));
  ASSERT_TRUE(
      quantize_fp8(DType::kF8E4M3, ScaleMode::kRowwise, rows, cols, w.data(), cols, q.data(), cols, scales.data())
          .is_ok());
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[size_t(r * cols + c)]));
    const float s = fp8_row_scale(amax, true);
    EXPECT_EQ(s, scales[size_t(r)]) << "row " << r;
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t b = q[size_t(r * cols + c)];
      EXPECT_NE(b & 0x7f, 0x7f) << "NaN at [" << r << "," << c << "]: saturation must give 448";
      if (std::fabs(w[size_t(r * cols + c)]) == amax && amax / 448 >= FLT_MIN) {
        EXPECT_EQ(b & 0x7f, 0x7e) << "amax -> 448";
      }
    }
  }
  EXPECT_EQ(fp8_row_scale(0.0f, true), 1.0f);
  EXPECT_EQ(fp8_row_scale(1e-43f, true), FLT_MIN);
  EXPECT_EQ(fp8_row_scale(448.0f, true), 1.0f);
  EXPECT_TRUE(std::isnan(fp8_row_scale(1.0f, false)));
  EXPECT_TRUE(std::isnan(fp8_row_scale(std::numeric_limits<float>::infinity(), false)));
  // A value past amax (rounding of the scale) saturates to 448, never to NaN.
  EXPECT_EQ(to_fp8_e4m3(448.0f * (1.0f + 0x1p-20f)).bits, 0x7e);
  EXPECT_EQ(to_fp8_e4m3(1e9f).bits, 0x7e);
}

// The weights' round trip against fp64: every element within e4m3's unit roundoff (2^-4)
// relative down to the smallest normal (2^-6 scale), 2^-10 scale absolute below; over a
// realistic weight row (normal values) the rms relative error is near 2^-4 / sqrt(3) / 2.
TEST(Fp8Scale, WeightRoundTripErrorIsBoundedByTheUnitRoundoff) {
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const int64_t rows = 16, cols = 1024;
  std::vector<float> w(size_t(rows * cols));
  for (float& v : w) v = normal(rng);
  const std::vector<float> back = round_rows_e4m3(w.data(), rows, cols);
  double num = 0, den = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(double(w[size_t(r * cols + c)])));
    const double scale = amax / 448.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double v = w[size_t(r * cols + c)], d = std::fabs(double(back[size_t(r * cols + c)]) - v);
      EXPECT_LE(d, std::max(0x1p-4 * std::fabs(v), 0x1p-10 * scale) * (1 + 1e-6)) << r << "," << c;
      num += d * d, den += v * v;
    }
  }
  EXPECT_LT(std::sqrt(num / den), 0x1p-4 / std::sqrt(3.0));
}

TEST(EngineDtype, Fp8IsOneGpuOnlyAndEveryRefusalNamesTheOption) {
  EngineOptions o;
  ASSERT_TRUE(apply_engine_dtype({"fp8", true, 1, false}, &o).is_ok());
  EXPECT_EQ(o.dtype, DType::kBF16);
  EXPECT_TRUE(o.fp8.projections);
  EXPECT_FALSE(o.fp8.lm_head);
  ASSERT_TRUE(apply_engine_dtype({"fp8-all", true, 1, false}, &o).is_ok());
  EXPECT_TRUE(o.fp8.projections && o.fp8.lm_head);
  ASSERT_TRUE(apply_engine_dtype({"fp32", true, 1, false}, &o).is_ok());
  EXPECT_EQ(o.dtype, DType::kF32);
  EXPECT_FALSE(o.fp8.any());
  EngineOptions cpu;
  ASSERT_TRUE(apply_engine_dtype({"bf16", false, 2, true}, &cpu).is_ok());  // the CPU ignores bf16/fp32
  EXPECT_EQ(cpu.dtype, EngineOptions{}.dtype);

  struct Refused {
    EngineDtypeRequest r;
    const char* names;
  };
  for (const Refused& x :
       {Refused{{"fp8", false, 1, false}, "--device cuda"}, Refused{{"fp8-all", true, 2, false}, "--tp"},
        Refused{{"fp8", true, 1, true}, "--save-model"}, Refused{{"int8", true, 1, false}, "--dtype"}}) {
    EngineOptions e;
    Status st = apply_engine_dtype(x.r, &e);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << x.names;
    EXPECT_NE(st.message().find(x.names), std::string::npos) << st.message();
    EXPECT_FALSE(e.fp8.any());
  }
}

TEST(EngineDtype, TheCpuEnginesRefuseFp8Options) {
  auto ctx = std::make_unique<Context>(Device::cpu(), Config::defaults_only());
  auto weights = std::make_shared<const ModelWeights>(make_random_weights(testing::small_llama(), 1));
  EngineOptions o = testing::options(1, 16, 1);
  o.fp8.projections = true;
  auto e = make_cpu_engine(weights, o, tunableop_linear(*ctx), tunableop_gemm(*ctx));
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("--dtype fp8"), std::string::npos) << e.status().message();
}

// LinearOp::scaled: the ScaledGemm problem PyTorch would key (rowwise e4m3, bf16 out, "tn"),
// counted by shape like a linear call, operands in the op's roles (A = W, B = x).
TEST(LinearOpScaled, CountsTheScaledGemmProblemAndPassesTheOperands) {
  LinearOp op([](DType, int64_t, int64_t, int64_t, const void*, const void*, void*, void*) { return Status::ok(); });
  uint8_t x[2] = {}, w[2] = {};
  float xs[1] = {}, ws[1] = {};
  char y[2] = {}, stream = 0;
  EXPECT_EQ(op.scaled(Phase::kDecode, 1, 2, 3, x, xs, w, ws, y, &stream).code(), StatusCode::kUnsupported);
  int calls = 0;
  op.set_scaled([&](const ScaledGemmParams& p, const ScaledGemmOperands& o) {
    ++calls;
    EXPECT_EQ(p.m, 4096);
    EXPECT_EQ(p.n, 3);
    EXPECT_EQ(p.k, 11008);
    EXPECT_EQ(p.scale_mode, ScaleMode::kRowwise);
    EXPECT_EQ(o.a, w);
    EXPECT_EQ(o.b, x);
    EXPECT_EQ(o.scale_a, ws);
    EXPECT_EQ(o.scale_b, xs);
    EXPECT_EQ(o.c, y);
    EXPECT_EQ(o.stream, &stream);
    return Status::ok();
  });
  op.reset_counts();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(op.scaled(Phase::kDecode, 3, 11008, 4096, x, xs, w, ws, y, &stream).is_ok());
  EXPECT_EQ(calls, 3);
  const auto problems = op.problems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].op, "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN");
  EXPECT_EQ(problems[0].params, "tn_4096_3_11008_ld_11008_11008_4096_rw_1_bias_None");
  EXPECT_EQ(problems[0].calls, 3);
  EXPECT_TRUE(problems[0].in_decode);
}

// fp8 rounding simulated on the CPU engine: the projections' weights rounded per output channel
// and their inputs per token (the lm_head kept, as the default --dtype fp8 keeps it bf16),
// teacher-forced along a 48-token sequence (38 positions past an 11-token prompt: CI's time; the
// GPU test takes 64) against the fp32 engine on the same sequence.
TEST(Fp8Accuracy, SimulatedFp8RoundingMeetsTheStatedThresholds) {
  constexpr int64_t kPositions = 48;
  int ran = 0;
  for (const testing::Fp8Fixture& f : testing::committed_fp8_fixtures()) {
    const std::string& dir = f.dir;
    const nlohmann::json& ref = f.ref;
    const char* name = f.name.c_str();
    SCOPED_TRACE(name);
    auto loaded = load_model(dir);
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    auto exact = std::make_shared<const ModelWeights>(std::move(loaded.value()));
    ModelWeights rounded = *exact;
    const ModelConfig& c = rounded.config;
    for (LayerWeights& l : rounded.layers) {
      l.wqkv = round_rows_e4m3(l.wqkv.data(), c.qkv_dim(), c.hidden_size);
      l.wo = round_rows_e4m3(l.wo.data(), c.hidden_size, c.q_dim());
      l.w_gate_up = round_rows_e4m3(l.w_gate_up.data(), 2 * c.intermediate_size, c.hidden_size);
      l.w_down = round_rows_e4m3(l.w_down.data(), c.hidden_size, c.intermediate_size);
    }
    auto sim_weights = std::make_shared<const ModelWeights>(std::move(rounded));
    Context ctx(Device::cpu(), Config::defaults_only());
    const EngineOptions o = testing::options(1, 96, 8);
    auto reference = make_cpu_engine(exact, o, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
    ASSERT_TRUE(reference.is_ok()) << reference.status().to_string();
    LinearOp::Fn plain = tunableop_linear(ctx);
    const void* head = sim_weights->lm_head_data();
    LinearOp::Fn fp8 = [plain, head](DType dt, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w,
                                     void* y, void* stream) {
      if (w == head) return plain(dt, tokens, in, out, x, w, y, stream);
      const std::vector<float> xq = round_rows_e4m3(static_cast<const float*>(x), tokens, in);
      return plain(dt, tokens, in, out, xq.data(), w, y, stream);
    };
    auto sim = make_cpu_engine(sim_weights, o, fp8, tunableop_gemm(ctx), tunableop_attention(ctx));
    ASSERT_TRUE(sim.is_ok()) << sim.status().to_string();

    const auto prompt = ref["prompt_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> forced = ref["greedy_ids"].get<std::vector<int32_t>>();
    std::vector<std::vector<float>> want, got;
    ASSERT_TRUE(testing::extend_greedy(**reference, prompt, &forced, kPositions, &want).is_ok());
    ASSERT_TRUE(testing::teacher_forced_logits(**sim, prompt, forced, &got).is_ok());
    const testing::Fp8Accuracy a = testing::compare_logits(got, want);
    std::printf("%s: fp8 rounding simulated on the CPU: %s\n", name, a.to_string().c_str());
    EXPECT_EQ(a.positions, int64_t(kPositions - prompt.size() + 1));
    testing::expect_fp8_accuracy(a, name);
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no fixtures in " << testing::fp8_fixture_root();
}

// The top-1 metric forgives near-ties only: an argmax within kFp8NearTie of the reference's top
// logit counts, one far below it (what a broken projection gives) does not.
TEST(Fp8Accuracy, NearTiesAreForgivenAndAWrongArgmaxIsNot) {
  const std::vector<std::vector<float>> want = {{10.f, 9.8f, 0.f, -3.f}, {10.f, 2.f, 0.f, -3.f}};
  const std::vector<std::vector<float>> tie = {{9.8f, 10.f, 0.f, -3.f}, {10.f, 2.f, 0.f, -3.f}};
  const testing::Fp8Accuracy a = testing::compare_logits(tie, want);
  EXPECT_DOUBLE_EQ(a.top1, 1.0);  // 10 - 9.8 <= 0.05 x 10
  EXPECT_DOUBLE_EQ(a.top1_strict, 0.5);
  const std::vector<std::vector<float>> wrong = {{10.f, 9.8f, 0.f, -3.f}, {0.f, 2.f, 10.f, -3.f}};
  const testing::Fp8Accuracy b = testing::compare_logits(wrong, want);
  EXPECT_DOUBLE_EQ(b.top1, 0.5);  // 10 - 0 > 0.05 x 10
  EXPECT_DOUBLE_EQ(b.top1_strict, 0.5);
}

}  // namespace
}  // namespace tunableop::llm
