// GemmAndBias params, signatures, the fp64 reference and every CPU candidate against it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/kernels/register.h"
#include "ops/gemm_and_bias/reference.h"
#include "support/gemm_testing.h"
#include "tunableop/gemm_and_bias.h"

namespace tunableop {
namespace {

using testing::describe;
using testing::HostGemmProblem;

GemmAndBiasParams make(DType dt, char ta, char tb, int64_t m, int64_t n, int64_t k, Activation act) {
  GemmAndBiasParams p;
  p.gemm.dtype = dt;
  p.gemm.transa = ta;
  p.gemm.transb = tb;
  p.gemm.m = m;
  p.gemm.n = n;
  p.gemm.k = k;
  p.act = act;
  return p.with_defaults();
}

TEST(GemmAndBiasSignature, PyTorchLayoutWithActivation) {
  GemmAndBiasParams p = make(DType::kF32, 'T', 'N', 1024, 512, 2048, Activation::kRelu);
  EXPECT_EQ(gemm_and_bias_op_signature(p), "GemmAndBiasTunableOp_float_TN");
  EXPECT_EQ(gemm_and_bias_params_signature(p), "tn_1024_512_2048_act_1");
  p.gemm.lda = 2050;
  p.act = Activation::kGelu;
  EXPECT_EQ(gemm_and_bias_params_signature(p), "tn_1024_512_2048_ld_2050_2048_1024_act_2");
  GemmAndBiasParams h = make(DType::kBF16, 'N', 'T', 3, 5, 7, Activation::kNone);
  EXPECT_EQ(gemm_and_bias_op_signature(h), "GemmAndBiasTunableOp_BFloat16_NT");
  EXPECT_EQ(gemm_and_bias_params_signature(h), "nt_3_5_7_act_0");
  h.gemm = make(DType::kF32, 'N', 'N', 3, 5, 7, Activation::kNone).gemm;
  h.gemm.allow_tf32 = true;
  EXPECT_EQ(gemm_and_bias_op_signature(h), "GemmAndBiasTunableOp_float_tf32_NN");
}

TEST(GemmAndBiasSignature, RoundTrips) {
  for (DType dt : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
      for (int t = 0; t < 4; ++t) {
        GemmAndBiasParams p = make(dt, t & 1 ? 'T' : 'N', t & 2 ? 'T' : 'N', 7 + t, 9, 13, act);
        if (t == 3) p.gemm.ldc = 40;
        if (t == 2 && dt == DType::kF32) p.gemm.allow_tf32 = true;
        auto q = parse_gemm_and_bias_signature(gemm_and_bias_op_signature(p), gemm_and_bias_params_signature(p));
        ASSERT_TRUE(q.is_ok()) << q.status().to_string();
        EXPECT_EQ(gemm_and_bias_op_signature(*q), gemm_and_bias_op_signature(p));
        EXPECT_EQ(gemm_and_bias_params_signature(*q), gemm_and_bias_params_signature(p));
        EXPECT_EQ(q->act, act);
        EXPECT_EQ(q->gemm.ldc, p.gemm.ldc);
        EXPECT_EQ(q->gemm.allow_tf32, p.gemm.allow_tf32);
      }
    }
  }
}

TEST(GemmAndBiasSignature, RejectsMalformedKeys) {
  const std::string op = "GemmAndBiasTunableOp_float_NN";
  for (auto [o, ps] : {std::pair<std::string, std::string>{op, "nn_1_2_3"},
                       {op, "nn_1_2_3_act_3"},
                       {op, "nn_1_2_3_act_"},
                       {op, "nn_1_2_3_act_1_"},
                       {op, "nn_1_2_3_B_2_act_0"},
                       {op, "tn_1_2_3_act_0"},
                       {"GemmTunableOp_float_NN", "nn_1_2_3_act_0"},
                       {"GemmAndBiasTunableOp_quad_NN", "nn_1_2_3_act_0"}}) {
    EXPECT_FALSE(parse_gemm_and_bias_signature(o, ps).is_ok()) << o << "," << ps;
  }
}

TEST(GemmAndBiasParams, Validation) {
  GemmAndBiasParams p = make(DType::kF32, 'N', 'N', 4, 5, 6, Activation::kRelu);
  EXPECT_TRUE(p.validate().is_ok());
  GemmAndBiasParams q = p;
  q.gemm.beta = 1.0;
  EXPECT_EQ(q.validate().code(), StatusCode::kInvalidArgument);
  q = p;
  q.gemm.batch = 2;
  q = q.with_defaults();
  EXPECT_EQ(q.validate().code(), StatusCode::kInvalidArgument);
  q = p;
  q.act = Activation(7);
  EXPECT_EQ(q.validate().code(), StatusCode::kInvalidArgument);
  q = p;
  q.gemm.lda = 3;
  EXPECT_EQ(q.validate().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(parse_activation("gelu").is_ok());
  EXPECT_EQ(*parse_activation("1"), Activation::kRelu);
  EXPECT_FALSE(parse_activation("swish").is_ok());
}

TEST(GemmAndBiasReference, ActivationValues) {
  EXPECT_EQ(apply_activation(Activation::kRelu, -2.0), 0.0);
  EXPECT_EQ(apply_activation(Activation::kRelu, 3.0), 3.0);
  EXPECT_EQ(apply_activation(Activation::kNone, -2.5), -2.5);
  EXPECT_NEAR(apply_activation(Activation::kGelu, 1.0), 0.8411919906, 1e-9);  // tanh form
  EXPECT_NEAR(apply_activation(Activation::kGelu, -1.0), -0.1588080094, 1e-9);
  EXPECT_EQ(apply_activation(Activation::kGelu, 0.0), 0.0);
}

// Host problem: A, B random, C NaN inside the matrix and a sentinel in ld gaps, bias random.
struct HostBiasProblem {
  GemmAndBiasParams p;
  HostGemmProblem g;
  std::vector<uint8_t> bias;
  static HostBiasProblem random(const GemmAndBiasParams& params, uint64_t seed) {
    HostBiasProblem h;
    h.p = params.with_defaults();
    h.g = HostGemmProblem::random(h.p.gemm, seed);
    std::mt19937_64 rng(seed + 99);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    h.bias.resize(size_t(h.p.gemm.m) * dtype_size(h.p.gemm.dtype));
    for (int64_t i = 0; i < h.p.gemm.m; ++i) store_from_double(h.p.gemm.dtype, h.bias.data(), i, dist(rng));
    return h;
  }
};

// Within tolerance of the fp64 reference, and every gap element still as it was.
::testing::AssertionResult matches(const HostBiasProblem& h, const std::vector<uint8_t>& c) {
  const GemmParams& g = h.p.gemm;
  std::vector<double> ref = gemm_and_bias_reference_f64(h.p, h.g.a.data(), h.g.b.data(), h.bias.data(), nullptr);
  double err = relative_error(g, c.data(), ref), tol = gemm_and_bias_tolerance(h.p);
  if (!(err <= tol)) return ::testing::AssertionFailure() << "relative error " << err << " > " << tol;
  const size_t es = dtype_size(g.dtype);
  for (int64_t e = 0; e < g.c_span(); ++e) {
    if (e % g.ldc < g.m) continue;
    if (std::memcmp(c.data() + size_t(e) * es, h.g.c_initial.data() + size_t(e) * es, es) != 0)
      return ::testing::AssertionFailure() << "gap element " << e << " was written";
  }
  return ::testing::AssertionSuccess();
}

std::vector<GemmAndBiasCandidate> cpu_candidates() {
  Registry r;
  register_cpu_kernels(r);
  std::vector<GemmAndBiasCandidate> out;
  for (const auto& c : r.list<GemmAndBiasCandidate>())
    if (c.device == DeviceKind::kCpu) out.push_back(c);
  return out;
}

TEST(GemmAndBiasCpu, DefaultIsRegistered) {
  auto cands = cpu_candidates();
  ASSERT_FALSE(cands.empty());
  EXPECT_EQ(cands.front().name, "Default");
}

class GemmAndBiasCpuCandidates : public ::testing::TestWithParam<DType> {};

TEST_P(GemmAndBiasCpuCandidates, MatchFp64ReferenceForEveryActivation) {
  const DType dt = GetParam();
  auto cands = cpu_candidates();
  ASSERT_FALSE(cands.empty());
  int runs = 0;
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
    // Odd sizes, all four transposes, ld > rows on every third shape; no batches.
    for (GemmParams g : testing::random_gemm_shapes(dt, 7 + uint64_t(act), 12, false, 67)) {
      g.beta = 0.0;
      GemmAndBiasParams p{g, act};
      HostBiasProblem h = HostBiasProblem::random(p, uint64_t(g.m * 31 + g.n));
      for (const auto& c : cands) {
        SCOPED_TRACE(c.name + " " + activation_name(act) + " " + describe(h.p.gemm));
        if (!c.supports(h.p).is_ok()) continue;
        std::vector<uint8_t> out = h.g.c_initial;  // NaN poison in the matrix
        GemmAndBiasOperands o{h.g.a.data(), h.g.b.data(), h.bias.data(), out.data()};
        Status st = c.run(h.p, o);
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        EXPECT_TRUE(matches(h, out));
        ++runs;
      }
    }
  }
  EXPECT_GE(runs, 36);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, GemmAndBiasCpuCandidates,
                         ::testing::Values(DType::kF32, DType::kF64, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(GemmAndBiasCpu, KZeroGivesActivationOfBias) {
  GemmAndBiasParams p = make(DType::kF32, 'N', 'N', 5, 3, 0, Activation::kRelu);
  HostBiasProblem h = HostBiasProblem::random(p, 3);
  for (const auto& c : cpu_candidates()) {
    std::vector<uint8_t> out = h.g.c_initial;
    GemmAndBiasOperands o{h.g.a.data(), h.g.b.data(), h.bias.data(), out.data()};
    ASSERT_TRUE(c.run(h.p, o).is_ok()) << c.name;
    EXPECT_TRUE(matches(h, out)) << c.name;
  }
}

}  // namespace
}  // namespace tunableop
