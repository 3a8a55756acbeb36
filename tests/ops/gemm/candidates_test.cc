// The real registry (every backend compiled into this build): each CPU GemmCandidate agrees with
// the fp64 reference, and gemm() tunes and serves a problem with it. Kept small; each backend's
// own tests go wider.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "ops/gemm/dispatch.h"
#include "support/gemm_testing.h"
#include "tunableop/gemm.h"

namespace tunableop {

// Test names and failure messages say "fp32", not "4-byte object <00-00 00-00>".
static void PrintTo(const DType& t, std::ostream* os) { *os << dtype_name(t); }

namespace {

namespace fs = std::filesystem;
using testing::describe;
using testing::HostGemmProblem;

bool in_matrix(const GemmParams& p, int64_t idx) {
  const int64_t b = idx / p.stride_c, r = idx % p.stride_c;
  return b < p.batch && r % p.ldc < p.m && r / p.ldc < p.n;
}

// Like testing::matches_reference, but gap elements are compared bit for bit with the initial C:
// the shared helper's gap sentinel is not exact in bf16/fp16.
::testing::AssertionResult agrees(const HostGemmProblem& prob, const std::vector<double>& ref,
                                  const std::vector<uint8_t>& out) {
  const GemmParams& p = prob.p;
  const size_t es = dtype_size(p.dtype);
  for (int64_t i = 0; i < p.c_span(); ++i)
    if (!in_matrix(p, i) && std::memcmp(&out[size_t(i) * es], &prob.c_initial[size_t(i) * es], es) != 0)
      return ::testing::AssertionFailure() << describe(p) << ": element " << i << " outside C was written";
  const double err = relative_error(p, out.data(), ref), limit = gemm_tolerance(p);
  if (!(err <= limit))
    return ::testing::AssertionFailure() << describe(p) << ": relative error " << err << " > " << limit;
  return ::testing::AssertionSuccess();
}

class RealRegistry : public ::testing::TestWithParam<DType> {};

TEST_P(RealRegistry, EveryCpuCandidateAgreesWithTheReference) {
  const DType dt = GetParam();
  Context ctx(Device::cpu(), Config::defaults_only());
  const bool wide = dt == DType::kF32 || dt == DType::kF64;
  std::set<std::string> ran;
  int checks = 0;
  for (const GemmParams& p : testing::random_gemm_shapes(dt, 4242 + uint64_t(dt), wide ? 8 : 4, true, 33)) {
    HostGemmProblem prob = HostGemmProblem::random(p, 17);
    auto ref = gemm_reference_f64(prob.p, prob.a.data(), prob.b.data(), prob.c_initial.data());
    auto cands = gemm_candidates_for(ctx, prob.p, /*search_effort=*/2);  // every candidate there is
    ASSERT_FALSE(cands.empty());
    ASSERT_EQ(cands.front().name, "Default");
    for (const GemmCandidate& c : cands) {
      Status sup = c.supports(prob.p);
      if (!sup.is_ok()) {
        EXPECT_TRUE(sup.is_unsupported()) << c.name << ": " << sup.to_string();
        continue;
      }
      std::vector<uint8_t> out = prob.c_initial;  // NaN where beta == 0: must not be read
      std::vector<uint8_t> ws(c.workspace_bytes ? c.workspace_bytes(prob.p) : 0);
      GemmOperands ops{prob.a.data(), prob.b.data(), out.data(), nullptr, ws.empty() ? nullptr : ws.data(), ws.size()};
      Status st = c.run(prob.p, ops);
      ASSERT_TRUE(st.is_ok()) << c.name << " on " << describe(prob.p) << ": " << st.to_string();
      EXPECT_TRUE(agrees(prob, ref, out)) << c.name;
      ran.insert(c.name);
      ++checks;
    }
  }
  if (wide) {
    EXPECT_TRUE(ran.count("Default")) << "Default must handle fp32 and fp64";
  }
  RecordProperty("candidates", int(ran.size()));
  RecordProperty("checks", checks);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, RealRegistry,
                         ::testing::Values(DType::kF32, DType::kF64, DType::kBF16, DType::kF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(RealRegistryDispatch, TunesServesAndReloads) {
  const fs::path dir =
      fs::temp_directory_path() / ("tunableop-real-registry-" + std::to_string(::getpid()) + "-" +
                                   std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  fs::create_directories(dir);
  Config cfg = Config::defaults_only();
  ASSERT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kFilename, (dir / "results%d.csv").string()).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, 2.0).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kMaxTuningIterations, 5).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kMaxWarmupIterations, 1).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kRotatingBufferSize, 0).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kSearchEffort, 0).is_ok());
  GemmParams p;
  p.transa = 'T';
  p.m = 48;
  p.n = 40;
  p.k = 56;
  p = p.with_defaults();
  std::string solution;
  {
    Context ctx(Device::cpu(), cfg);
    HostGemmProblem prob = HostGemmProblem::random(p, 1);
    Status st = gemm(ctx, prob.p, GemmOperands{prob.a.data(), prob.b.data(), prob.c.data()});
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_TRUE(testing::matches_reference(prob, prob.c));
    auto e = ctx.results().lookup(gemm_op_signature(p), gemm_params_signature(p));
    ASSERT_TRUE(e.has_value());
    solution = e->solution;
    EXPECT_TRUE(find_gemm_candidate(ctx, p, solution).is_ok()) << solution;
  }
  std::ifstream in(dir / "results0.csv");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("GemmTunableOp_float_TN,tn_48_40_56," + solution + ","), std::string::npos) << text;
  {
    ASSERT_TRUE(cfg.set(Setting::kTuning, false).is_ok());
    Context again(Device::cpu(), cfg);
    HostGemmProblem prob = HostGemmProblem::random(p, 2);
    ASSERT_TRUE(gemm(again, prob.p, GemmOperands{prob.a.data(), prob.b.data(), prob.c.data()}).is_ok());
    EXPECT_TRUE(testing::matches_reference(prob, prob.c));
    auto e = again.results().lookup(gemm_op_signature(p), gemm_params_signature(p));
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->solution, solution);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(RealRegistryDispatch, LinearMatchesANaiveLoop) {
  Context ctx(Device::cpu(), Config::defaults_only());  // enabled off: the real Default
  const int64_t tokens = 5, in = 33, out = 17;
  std::vector<float> x(size_t(tokens * in)), w(size_t(out * in)), y(size_t(tokens * out), -7.f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7 % 13) - 6) / 8.f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 5 % 11) - 5) / 4.f;
  ASSERT_TRUE(linear(ctx, DType::kF32, tokens, in, out, x.data(), w.data(), y.data()).is_ok());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double want = 0;
      for (int64_t i = 0; i < in; ++i) want += double(x[size_t(t * in + i)]) * double(w[size_t(o * in + i)]);
      EXPECT_NEAR(y[size_t(t * out + o)], want, 1e-4 * (1 + std::abs(want))) << "token " << t << " out " << o;
    }
}

}  // namespace
}  // namespace tunableop
