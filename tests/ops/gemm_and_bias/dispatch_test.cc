// gemm_and_bias() end to end through a Context: test candidates timed by a virtual clock (a
// correct "Default", a faster "GemmAndBias_Fast", a fastest but wrong "GemmAndBias_Wrong"), and
// the real CPU backends. Results files go to a scratch directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>

#include "backends/cpu_runtime.h"
#include "ops/gemm/reference.h"
#include "ops/gemm_and_bias/reference.h"
#include "support/scratch_dir.h"
#include "support/virtual_clock.h"
#include "tunableop/context.h"
#include "tunableop/gemm_and_bias.h"

namespace tunableop {
namespace {

namespace fs = std::filesystem;

using ScratchDir = testing::ScratchDir;

std::vector<std::string> entries(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.rfind("Validator,", 0) != 0) out.push_back(line);
  return out;
}

// Writes the fp64 reference into the m x n matrix of C (fp32/fp64 only).
Status run_reference(const GemmAndBiasParams& p, const GemmAndBiasOperands& o) {
  const GemmParams& g = p.gemm;
  if (g.dtype != DType::kF32 && g.dtype != DType::kF64) return Status::unsupported("fp32/fp64 only");
  std::vector<double> ref = gemm_and_bias_reference_f64(p, o.a, o.b, o.bias, nullptr);
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t i = 0; i < g.m; ++i) store_from_double(g.dtype, o.c, i + j * g.ldc, ref[size_t(i + j * g.ldc)]);
  return Status::ok();
}

class TestBackend {
 public:
  RegisterFn registrar() {
    return [this](Registry& r) {
      testing::register_host_on_virtual_clock(r, clock_);
      for (const char* n : {"Default", "GemmAndBias_Wrong", "GemmAndBias_Fast"})
        r.list<GemmAndBiasCandidate>().push_back(candidate(n));
    };
  }
  int calls(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[name];
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.clear();
  }

 private:
  GemmAndBiasCandidate candidate(const std::string& name) {
    GemmAndBiasCandidate c;
    c.name = name;
    c.supports = [](const GemmAndBiasParams& p) {
      return p.gemm.dtype == DType::kF32 || p.gemm.dtype == DType::kF64 ? Status::ok()
                                                                        : Status::unsupported("fp32/fp64 only");
    };
    const double cost = name == "Default" ? 2.0 : name == "GemmAndBias_Fast" ? 0.3 : 0.01;
    const bool wrong = name == "GemmAndBias_Wrong";
    c.run = [this, name, cost, wrong](const GemmAndBiasParams& p, const GemmAndBiasOperands& o) -> Status {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++calls_[name];
      }
      TUNABLEOP_RETURN_IF_ERROR(run_reference(p, o));
      if (wrong) store_from_double(p.gemm.dtype, o.c, 0, load_as_double(p.gemm.dtype, o.c, 0) + 1.0);
      clock_.fetch_add(cost);
      return Status::ok();
    };
    return c;
  }
  std::mutex mu_;
  std::map<std::string, int> calls_;
  std::atomic<double> clock_{0};
};

// Random fp32 operands for p (dense), C poisoned with NaN.
struct F32Problem {
  GemmAndBiasParams p;
  std::vector<float> a, b, bias, c;
  explicit F32Problem(const GemmAndBiasParams& params, uint64_t seed) : p(params.with_defaults()) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (auto [v, n] : {std::pair{&a, p.gemm.a_span()}, {&b, p.gemm.b_span()}, {&bias, p.gemm.m}}) {
      v->resize(size_t(n));
      for (float& x : *v) x = d(rng);
    }
    c.assign(size_t(p.gemm.c_span()), std::nanf(""));
  }
  GemmAndBiasOperands operands() { return {a.data(), b.data(), bias.data(), c.data()}; }
  double error() const {
    auto ref = gemm_and_bias_reference_f64(p, a.data(), b.data(), bias.data(), nullptr);
    return relative_error(p.gemm, c.data(), ref);
  }
};

GemmAndBiasParams shape(char ta, char tb, int64_t m, int64_t n, int64_t k, Activation act) {
  GemmAndBiasParams p;
  p.gemm.transa = ta;
  p.gemm.transb = tb;
  p.gemm.m = m;
  p.gemm.n = n;
  p.gemm.k = k;
  p.act = act;
  return p;
}

class GemmAndBiasDispatch : public ::testing::Test {
 protected:
  Config config(bool tuning) {
    Config c = Config::defaults_only();
    EXPECT_TRUE(c.set(Setting::kEnabled, true).is_ok());
    EXPECT_TRUE(c.set(Setting::kTuning, tuning).is_ok());
    EXPECT_TRUE(c.set(Setting::kFilename, dir_.file("results%d.csv")).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxTuningDurationMs, 4.0).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxTuningIterations, 3).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxWarmupDurationMs, 1.0).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxWarmupIterations, 1).is_ok());
    EXPECT_TRUE(c.set(Setting::kRotatingBufferSize, 0).is_ok());
    return c;
  }
  std::string results() const { return dir_.file("results0.csv"); }
  ScratchDir dir_;
  TestBackend backend_;
};

TEST_F(GemmAndBiasDispatch, TunesOnceThenServesTheWinner) {
  const GemmAndBiasParams p = shape('N', 'N', 16, 12, 8, Activation::kRelu);
  {
    Context ctx(Device::cpu(), config(true), backend_.registrar());
    F32Problem prob(p, 1);
    ASSERT_TRUE(gemm_and_bias(ctx, prob.p, prob.operands()).is_ok());
    EXPECT_LE(prob.error(), 1e-6);
    auto lines = entries(results());
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0].rfind("GemmAndBiasTunableOp_float_NN,nn_16_12_8_act_1,GemmAndBias_Fast,", 0), 0u) << lines[0];
    const int wrong_runs = backend_.calls("GemmAndBias_Wrong");

    backend_.reset();
    F32Problem again(p, 2);
    ASSERT_TRUE(gemm_and_bias(ctx, again.p, again.operands()).is_ok());
    EXPECT_LE(again.error(), 1e-6);
    EXPECT_EQ(backend_.calls("GemmAndBias_Fast"), 1);
    EXPECT_EQ(backend_.calls("Default"), 0);
    EXPECT_EQ(backend_.calls("GemmAndBias_Wrong"), 0);
    EXPECT_GE(wrong_runs, 1) << "the wrong candidate was screened, then failed the check";
    EXPECT_EQ(entries(results()).size(), 1u);

    // Another activation is another problem.
    F32Problem gelu(shape('N', 'N', 16, 12, 8, Activation::kGelu), 3);
    ASSERT_TRUE(gemm_and_bias(ctx, gelu.p, gelu.operands()).is_ok());
    EXPECT_LE(gelu.error(), 1e-6);
    EXPECT_EQ(entries(results()).size(), 2u);
  }
  // A later run loads the file and serves without tuning.
  backend_.reset();
  Context fresh(Device::cpu(), config(true), backend_.registrar());
  F32Problem prob(p, 4);
  ASSERT_TRUE(gemm_and_bias(fresh, prob.p, prob.operands()).is_ok());
  EXPECT_LE(prob.error(), 1e-6);
  EXPECT_EQ(backend_.calls("GemmAndBias_Fast"), 1);
  EXPECT_EQ(backend_.calls("Default"), 0);
  EXPECT_EQ(entries(results()).size(), 2u);
}

TEST_F(GemmAndBiasDispatch, TuningOffRunsDefault) {
  Context ctx(Device::cpu(), config(false), backend_.registrar());
  F32Problem prob(shape('T', 'N', 9, 7, 5, Activation::kNone), 1);
  ASSERT_TRUE(gemm_and_bias(ctx, prob.p, prob.operands()).is_ok());
  EXPECT_LE(prob.error(), 1e-6);
  EXPECT_EQ(backend_.calls("Default"), 1);
  EXPECT_EQ(backend_.calls("GemmAndBias_Fast"), 0);
  EXPECT_TRUE(entries(results()).empty());
}

TEST_F(GemmAndBiasDispatch, RejectsBadArgumentsAndSkipsEmptyProblems) {
  Context ctx(Device::cpu(), config(true), backend_.registrar());
  F32Problem prob(shape('N', 'N', 4, 4, 4, Activation::kRelu), 1);
  GemmAndBiasOperands o = prob.operands();
  o.bias = nullptr;
  EXPECT_EQ(gemm_and_bias(ctx, prob.p, o).code(), StatusCode::kInvalidArgument);
  GemmAndBiasParams beta = prob.p;
  beta.gemm.beta = 0.5;
  EXPECT_EQ(gemm_and_bias(ctx, beta, prob.operands()).code(), StatusCode::kInvalidArgument);
  GemmAndBiasParams empty = shape('N', 'N', 0, 4, 4, Activation::kNone);
  EXPECT_TRUE(gemm_and_bias(ctx, empty, GemmAndBiasOperands{}).is_ok());
  EXPECT_EQ(backend_.calls("Default"), 0);
}

TEST_F(GemmAndBiasDispatch, RealCpuBackendTunesAndIsCorrect) {
  // The real registry (every CPU backend in this build) and the real clock and numerics check.
  Context ctx(Device::cpu(), config(true));
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
    GemmAndBiasParams p = shape('N', 'T', 33, 17, 29, act);
    p.gemm.ldc = 40;  // ld gap: must not be written
    F32Problem prob(p, 5);
    for (int64_t j = 0; j < prob.p.gemm.n; ++j)
      for (int64_t i = prob.p.gemm.m; i < prob.p.gemm.ldc && i + j * 40 < prob.p.gemm.c_span(); ++i)
        prob.c[size_t(i + j * 40)] = 7.0f;
    Status st = gemm_and_bias(ctx, prob.p, prob.operands());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_LE(prob.error(), gemm_and_bias_tolerance(prob.p));
    for (int64_t j = 0; j < prob.p.gemm.n; ++j)
      for (int64_t i = prob.p.gemm.m; i < 40 && i + j * 40 < prob.p.gemm.c_span(); ++i)
        ASSERT_EQ(prob.c[size_t(i + j * 40)], 7.0f) << "gap written at " << i << "," << j;
  }
  auto lines = entries(results());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("GemmAndBiasTunableOp_float_NT,nt_33_17_29_ld_33_17_40_act_0,Default,", 0), 0u) << lines[0];
}

}  // namespace
}  // namespace tunableop
