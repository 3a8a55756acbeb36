// Our CPU GEMM kernels: every registered candidate against the fp64 reference on poisoned
// random problems (all dtypes, transposes, ld gaps, alpha/beta, batches, n == 1), block
// boundaries crossed with small blocks on every ISA this CPU has, the registration rules, bad
// arguments, and use from several threads at once.
#include <gtest/gtest.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/kernels/blocked_gemm.h"
#include "backends/cpu/kernels/cpu_features.h"
#include "backends/cpu/kernels/register.h"
#include "backends/cpu/kernels/skinny_gemm.h"
#include "backends/cpu_runtime.h"
#include "core/results_test_util.h"
#include "ops/gemm/reference.h"
#include "support/gemm_testing.h"
#include "tunableop/context.h"
#include "tunableop/gemm.h"
#include "tunableop/registry.h"

namespace tunableop {
namespace {

using testing::describe;
using testing::HostGemmProblem;
using testing::matches_reference;

const DType kAllDtypes[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16};

std::vector<GemmCandidate> registered() {
  Registry r;
  register_cpu_kernels(r);
  return r.list<GemmCandidate>();
}

using RunFn = std::function<Status(const GemmParams&, const GemmOperands&)>;

bool in_matrix(const GemmParams& p, int64_t idx) {
  const int64_t b = idx / p.stride_c, r = idx % p.stride_c;
  return b < p.batch && r % p.ldc < p.m && r / p.ldc < p.n;
}

// One problem and its fp64 reference, computed once for all the candidates run on it.
// matches_reference() recomputes the reference on every call and compares gaps with a sentinel
// (12345) that bf16/fp16 cannot represent; this compares gaps bit for bit with the initial C
// instead and applies the same tolerance.
struct CheckedProblem {
  HostGemmProblem prob;
  std::vector<double> ref;
  CheckedProblem(const GemmParams& p, uint64_t seed) : prob(HostGemmProblem::random(p, seed)) {
    ref = gemm_reference_f64(prob.p, prob.a.data(), prob.b.data(), prob.c_initial.data());
  }
  ::testing::AssertionResult check(const std::vector<uint8_t>& out) const {
    const GemmParams& p = prob.p;
    const size_t es = dtype_size(p.c_dtype());
    for (int64_t i = 0; i < p.c_span(); ++i) {
      if (!in_matrix(p, i) && std::memcmp(&out[size_t(i) * es], &prob.c_initial[size_t(i) * es], es) != 0)
        return ::testing::AssertionFailure() << describe(p) << ": element " << i << " outside C was written";
    }
    const double err = relative_error(p, out.data(), ref), limit = gemm_tolerance(p);
    if (!(err <= limit))
      return ::testing::AssertionFailure() << describe(p) << ": relative error " << err << " > " << limit;
    return ::testing::AssertionSuccess();
  }
};

// Runs `fn` on a fresh copy of the problem's C and checks the result.
::testing::AssertionResult run_and_check(const std::string& name, const RunFn& fn, const CheckedProblem& cp,
                                         bool also_shared_helper = false) {
  std::vector<uint8_t> out = cp.prob.c_initial;
  GemmOperands ops;
  ops.a = cp.prob.a.data();
  ops.b = cp.prob.b.data();
  ops.c = out.data();
  Status st = fn(cp.prob.p, ops);
  if (!st.is_ok())
    return ::testing::AssertionFailure() << name << " on " << describe(cp.prob.p) << ": " << st.to_string();
  auto r = cp.check(out);
  if (!r) return ::testing::AssertionFailure() << name << ": " << r.message();
  // The shared helper too, where its sentinel is exact (it recomputes the reference: small
  // problems only).
  if (also_shared_helper && (cp.prob.p.dtype == DType::kF32 || cp.prob.p.dtype == DType::kF64)) {
    r = matches_reference(cp.prob, out);
    if (!r) return ::testing::AssertionFailure() << name << ": " << r.message();
  }
  return r;
}

GemmParams shape(DType dt, char ta, char tb, int64_t m, int64_t n, int64_t k, double alpha = 1.0, double beta = 0.0,
                 int64_t ldc = 0) {
  GemmParams p;
  p.dtype = dt;
  p.transa = ta;
  p.transb = tb;
  p.m = m;
  p.n = n;
  p.k = k;
  p.alpha = alpha;
  p.beta = beta;
  p.ldc = ldc;
  return p.with_defaults();
}

// Problems every candidate must get right: the random spread plus GEMV-like and n <= 8 ones
// (the skinny path), and ld gaps on those.
std::vector<GemmParams> problems_for(DType dt, uint64_t seed) {
  std::vector<GemmParams> ps = testing::random_gemm_shapes(dt, seed, 24, true, 97);
  ps.push_back(shape(dt, 'T', 'N', 301, 1, 257));  // decode-style tn GEMV
  ps.push_back(shape(dt, 'N', 'N', 299, 1, 130, -0.5, 1.0));
  ps.push_back(shape(dt, 'N', 'T', 77, 3, 45, 2.0, -1.5));
  ps.push_back(shape(dt, 'T', 'T', 130, 8, 70, 1.0, 1.0));
  GemmParams gap = shape(dt, 'T', 'N', 67, 5, 33, 1.0, 0.5);
  gap.lda += 3;
  gap.ldb += 2;
  gap.ldc += 5;
  gap.batch = 2;
  gap.stride_a = gap.stride_b = gap.stride_c = 0;
  ps.push_back(gap.with_defaults());
  return ps;
}

TEST(CpuKernelsRegistration, DefaultFirstThenNamedVariants) {
  auto cs = registered();
  ASSERT_FALSE(cs.empty());
  EXPECT_EQ(cs.front().name, "Default");
  EXPECT_EQ(cs.front().min_effort, 0);
  std::set<std::string> names;
  std::map<int, int> per_effort;
  const std::regex pattern(
      R"(Gemm_(Blocked_(avx512|avx2|portable)_mc\d+_nc\d+_kc\d+|Skinny_(avx512|avx2|portable))_t\d+)");
  for (const auto& c : cs) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
    EXPECT_EQ(c.device, DeviceKind::kCpu) << c.name;
    EXPECT_TRUE(c.supports && c.run) << c.name;
    EXPECT_GE(c.min_effort, 0);
    EXPECT_LE(c.min_effort, 2);
    ++per_effort[c.min_effort];
    if (c.name != "Default") {
      EXPECT_TRUE(std::regex_match(c.name, pattern)) << c.name;
    }
    // Only ISAs this CPU has.
    for (auto isa : {cpu_kernels::Isa::kAvx512, cpu_kernels::Isa::kAvx2}) {
      if (c.name.find(std::string("_") + cpu_kernels::isa_name(isa) + "_") != std::string::npos) {
        EXPECT_TRUE(cpu_kernels::isa_available(isa)) << c.name;
      }
    }
  }
  // Effort 0 offers few, effort 1 a sensible set.
  EXPECT_LE(per_effort[0], 3);
  EXPECT_GE(per_effort[0] + per_effort[1], 4);
  EXPECT_LE(per_effort[0] + per_effort[1], 10);
  for (const auto& c : cs) std::printf("  %-45s min_effort=%d\n", c.name.c_str(), c.min_effort);
}

// Runs as its own ctest entries with TUNABLEOP_CPU_MAX_ISA set (CMakeLists.txt); skipped without.
TEST(CpuFeatures, MaxIsaEnvironmentCapsTheLevels) {
  const char* env = std::getenv("TUNABLEOP_CPU_MAX_ISA");
  if (!env) GTEST_SKIP() << "TUNABLEOP_CPU_MAX_ISA not set";
  const std::string cap = env;
  if (cap != "portable" && cap != "avx2") GTEST_SKIP() << "checks the caps below avx512 only";
  const bool avx2_allowed = cap == "avx2";
  EXPECT_FALSE(cpu_kernels::isa_available(cpu_kernels::Isa::kAvx512));
  if (!avx2_allowed) EXPECT_FALSE(cpu_kernels::isa_available(cpu_kernels::Isa::kAvx2));
  EXPECT_TRUE(cpu_kernels::isa_available(cpu_kernels::Isa::kPortable));
  // No candidate of a level above the cap.
  for (const auto& c : registered()) {
    EXPECT_EQ(c.name.find("_avx512_"), std::string::npos) << c.name;
    if (!avx2_allowed) EXPECT_EQ(c.name.find("_avx2_"), std::string::npos) << c.name;
  }
}

TEST(CpuKernelsRegistration, DefaultAndBlockedSupportEverySkinnyOnlySmallN) {
  for (const auto& c : registered()) {
    for (DType dt : kAllDtypes) {
      GemmParams wide = shape(dt, 'N', 'T', 64, 64, 64);
      GemmParams narrow = shape(dt, 'T', 'N', 64, 1, 64);
      EXPECT_TRUE(c.supports(narrow).is_ok()) << c.name;
      Status s = c.supports(wide);
      if (c.name.rfind("Gemm_Skinny_", 0) == 0) {
        EXPECT_TRUE(s.is_unsupported()) << c.name;
      } else {
        EXPECT_TRUE(s.is_ok()) << c.name << ": " << s.to_string();
      }
    }
  }
}

class CpuKernelsEveryCandidate : public ::testing::TestWithParam<DType> {};

TEST_P(CpuKernelsEveryCandidate, MatchesReference) {
  const DType dt = GetParam();
  auto cs = registered();
  uint64_t seed = 100 + uint64_t(dt);
  for (const GemmParams& p : problems_for(dt, seed)) {
    CheckedProblem prob(p, seed++);
    for (const auto& c : cs) {
      if (!c.supports(prob.prob.p).is_ok()) continue;
      EXPECT_TRUE(run_and_check(c.name, c.run, prob, true));
    }
  }
}

// Larger than one block of every registered blocking in m and k (mc <= 384, kc <= 512), odd
// everywhere, so full and edge tiles, several k blocks and the m split between threads all run.
TEST_P(CpuKernelsEveryCandidate, LargerThanOneBlock) {
  const DType dt = GetParam();
  CheckedProblem prob(shape(dt, 'N', 'T', 397, 53, 521, 1.0, -1.0, 401), 7);
  for (const auto& c : registered()) {
    if (!c.supports(prob.prob.p).is_ok()) continue;
    EXPECT_TRUE(run_and_check(c.name, c.run, prob));
  }
}

// A C wider than A and B (bf16 or fp16 inputs, fp32 output: GemmParams::out_dtype): the blocked
// path accumulates straight into C, so Default and every blocked variant take it; the skinny
// kernel declines it.
TEST(CpuKernelsWiderC, EveryCandidateThatTakesItMatchesReference) {
  auto cs = registered();
  uint64_t seed = 700;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    std::vector<GemmParams> ps = problems_for(dt, seed);
    ps.push_back(shape(dt, 'N', 'T', 397, 53, 521, 1.0, -1.0, 401));  // several k blocks: beta once
    for (GemmParams p : ps) {
      p.out_dtype = DType::kF32;
      CheckedProblem prob(p.with_defaults(), seed++);
      int ran = 0;
      for (const auto& c : cs) {
        const Status st = c.supports(prob.prob.p);
        if (c.name == "Default" || c.name.rfind("Gemm_Blocked_", 0) == 0) {
          EXPECT_TRUE(st.is_ok()) << c.name << " " << describe(prob.prob.p) << ": " << st.to_string();
        } else {
          EXPECT_TRUE(st.is_unsupported()) << c.name << " " << describe(prob.prob.p);
        }
        if (!st.is_ok()) continue;
        EXPECT_TRUE(run_and_check(c.name, c.run, prob));
        ++ran;
      }
      EXPECT_GT(ran, 1) << describe(prob.prob.p);
    }
  }
}

// Through a context: the wider C is its own problem, tuned among the candidates that take it
// and stored under its own name.
TEST(CpuKernelsWiderC, TunedThroughAContext) {
  testing::TempDir dir;
  Config cfg = Config::defaults_only();
  ASSERT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kTuning, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kFilename, dir.file("results%d.csv")).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, 5.0).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kMaxWarmupDurationMs, 1.0).is_ok());
  Context ctx(Device::cpu(), std::move(cfg), [](Registry& r) {
    register_cpu_runtime(r);
    register_cpu_kernels(r);
  });
  GemmParams p = shape(DType::kBF16, 'T', 'N', 67, 3, 129);
  p.out_dtype = DType::kF32;
  CheckedProblem prob(p.with_defaults(), 41);
  EXPECT_TRUE(run_and_check(
      "gemm()", [&](const GemmParams& q, const GemmOperands& o) { return gemm(ctx, q, o); }, prob));
  auto stored = ctx.results().lookup("GemmTunableOp_BFloat16_float_TN", "tn_67_3_129");
  ASSERT_TRUE(stored.has_value());
  EXPECT_TRUE(stored->solution == "Default" || stored->solution.rfind("Gemm_Blocked_", 0) == 0) << stored->solution;
  EXPECT_FALSE(ctx.results().contains("GemmTunableOp_BFloat16_TN", "tn_67_3_129"));
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, CpuKernelsEveryCandidate, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Tiny blocks, so that shapes up to ~300 cross the mc, nc and kc boundaries many times, on
// every ISA this CPU has and with 1 and 2 threads.
TEST(CpuKernelsBlocked, SmallBlocksCrossEveryBoundaryOnEveryIsa) {
  const cpu_kernels::Isa isas[] = {cpu_kernels::Isa::kPortable, cpu_kernels::Isa::kAvx2, cpu_kernels::Isa::kAvx512};
  const int64_t blocks[][3] = {{40, 30, 17}, {64, 48, 64}};  // mc, nc, kc (rounded to mr / nr inside)
  uint64_t seed = 500;
  for (DType dt : kAllDtypes) {
    std::vector<GemmParams> ps = testing::random_gemm_shapes(dt, seed, 8, true, 300);
    ps.push_back(shape(dt, 'T', 'T', 257, 131, 300, -0.5, 1.0));
    for (const GemmParams& p : ps) {
      CheckedProblem prob(p, seed++);
      for (auto isa : isas) {
        if (!cpu_kernels::isa_available(isa)) continue;
        for (const auto& b : blocks) {
          for (int threads : {1, 2}) {
            cpu_kernels::BlockedConfig cfg{isa, b[0], b[1], b[2], threads};
            std::string name = std::string("blocked ") + cpu_kernels::isa_name(isa) + " mc" + std::to_string(b[0]) +
                               " t" + std::to_string(threads);
            RunFn fn = [cfg](const GemmParams& q, const GemmOperands& o) {
              return cpu_kernels::blocked_gemm(q, o, cfg);
            };
            EXPECT_TRUE(run_and_check(name, fn, prob));
          }
        }
      }
    }
  }
}

// The skinny driver is correct for any n (the candidates only offer it for n <= 8).
TEST(CpuKernelsSkinny, AnyShapeOnEveryIsa) {
  uint64_t seed = 900;
  for (DType dt : kAllDtypes) {
    for (const GemmParams& p : testing::random_gemm_shapes(dt, seed, 12, true, 150)) {
      CheckedProblem prob(p, seed++);
      for (auto isa : {cpu_kernels::Isa::kPortable, cpu_kernels::Isa::kAvx2, cpu_kernels::Isa::kAvx512}) {
        if (!cpu_kernels::isa_available(isa)) continue;
        cpu_kernels::SkinnyConfig cfg{isa, 2};
        RunFn fn = [cfg](const GemmParams& q, const GemmOperands& o) { return cpu_kernels::skinny_gemm(q, o, cfg); };
        EXPECT_TRUE(run_and_check(std::string("skinny ") + cpu_kernels::isa_name(isa), fn, prob));
      }
    }
  }
}

// k == 0 and alpha == 0 reduce to C = beta * C and must not read A and B (null here).
TEST(CpuKernelsEdgeCases, EmptyKAndZeroAlphaScaleC) {
  for (const auto& c : registered()) {
    for (double beta : {0.0, 2.0}) {
      for (int64_t k : {int64_t(0), int64_t(5)}) {
        GemmParams p = shape(DType::kF32, 'N', 'N', 3, 2, k, k == 0 ? 1.0 : 0.0, beta);
        std::vector<float> cbuf(6, beta == 0 ? std::numeric_limits<float>::quiet_NaN() : 1.5f);
        GemmOperands ops;
        ops.c = cbuf.data();
        ASSERT_TRUE(c.run(p, ops).is_ok()) << c.name;
        for (float v : cbuf) EXPECT_EQ(v, beta == 0 ? 0.0f : 3.0f) << c.name;
      }
    }
    GemmParams empty = shape(DType::kF64, 'T', 'T', 0, 4, 3);
    EXPECT_TRUE(c.run(empty, GemmOperands{}).is_ok()) << c.name;
  }
}

TEST(CpuKernelsEdgeCases, BadArgumentsAreReportedNotFatal) {
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
  GemmOperands ops;
  ops.a = a.data();
  ops.b = b.data();
  ops.c = c.data();
  GemmParams ok = shape(DType::kF32, 'N', 'N', 4, 4, 4);
  GemmParams bad_ld = ok;
  bad_ld.lda = 3;
  GemmParams bad_trans = ok;
  bad_trans.transa = 'X';
  GemmParams bad_batch = ok;
  bad_batch.batch = 0;
  GemmParams overlap = ok;
  overlap.batch = 2;
  overlap.stride_c = 4;
  GemmParams negative = ok;
  negative.m = -1;
  for (const auto& cand : registered()) {
    for (const GemmParams& p : {bad_ld, bad_trans, bad_batch, overlap, negative}) {
      Status s = cand.run(p, ops);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << cand.name << " " << describe(p);
    }
    GemmOperands no_a = ops;
    no_a.a = nullptr;
    EXPECT_EQ(cand.run(ok, no_a).code(), StatusCode::kInvalidArgument) << cand.name;
  }
}

// ld/stride left at 0 mean dense, as with_defaults() would fill them.
TEST(CpuKernelsEdgeCases, ZeroLeadingDimensionsMeanDense) {
  GemmParams p;
  p.dtype = DType::kF64;
  p.transa = 'T';
  p.m = 37;
  p.n = 29;
  p.k = 41;
  p.batch = 2;
  CheckedProblem prob(p, 3);
  for (const auto& c : registered()) {
    if (!c.supports(prob.prob.p).is_ok()) continue;
    RunFn raw = [&](const GemmParams&, const GemmOperands& o) { return c.run(p, o); };  // p, not prob.p
    EXPECT_TRUE(run_and_check(c.name, raw, prob));
  }
}

TEST(CpuKernelsThreads, ConcurrentCallsAndCallerOmpSettingsUntouched) {
#ifdef _OPENMP
  const int before = omp_get_max_threads();
#endif
  auto cs = registered();
  GemmParams p = shape(DType::kF32, 'T', 'N', 150, 70, 90, 1.0, 1.0);
  CheckedProblem prob(p, 11);
  std::vector<int> failures(4, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t) {
    pool.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep)
        for (const auto& c : cs)
          if (c.supports(prob.prob.p).is_ok() && !run_and_check(c.name, c.run, prob)) ++failures[t];
    });
  }
  for (auto& th : pool) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
#ifdef _OPENMP
  EXPECT_EQ(omp_get_max_threads(), before);
#endif
}

}  // namespace
}  // namespace tunableop
