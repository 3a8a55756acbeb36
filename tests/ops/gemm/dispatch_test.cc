// gemm() end to end through a Context with a registry of test candidates: a correct naive
// "Default", a correct "Gemm_Fast" that is artificially faster, a "Gemm_Wrong" that is fastest but
// wrong. Real operands, numerics check and results files (in a scratch directory); the tuner's
// clock is virtual, advanced by each candidate's nominal cost.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu_runtime.h"
#include "ops/gemm/dispatch.h"
#include "support/gemm_testing.h"
#include "support/scratch_dir.h"
#include "support/virtual_clock.h"
#include "tunableop/gemm.h"

namespace tunableop {
namespace {

namespace fs = std::filesystem;
using testing::HostGemmProblem;
using testing::matches_reference;

using ScratchDir = testing::ScratchDir;

std::vector<std::string> lines_of(const std::string& path, bool entries_only) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && !(entries_only && line.rfind("Validator,", 0) == 0)) out.push_back(line);
  return out;
}

// C = alpha op(A) op(B) + beta C, one element at a time; never reads C when beta == 0.
template <class T>
void naive_gemm(const GemmParams& p, const T* a, const T* b, T* c) {
  for (int64_t bt = 0; bt < p.batch; ++bt) {
    for (int64_t j = 0; j < p.n; ++j) {
      for (int64_t i = 0; i < p.m; ++i) {
        double acc = 0;
        for (int64_t l = 0; l < p.k; ++l) {
          double av = a[bt * p.stride_a + (p.transa == 'N' ? i + l * p.lda : l + i * p.lda)];
          double bv = b[bt * p.stride_b + (p.transb == 'N' ? l + j * p.ldb : j + l * p.ldb)];
          acc += av * bv;
        }
        T& out = c[bt * p.stride_c + i + j * p.ldc];
        out = T(p.alpha * acc + (p.beta != 0.0 ? p.beta * double(out) : 0.0));
      }
    }
  }
}

Status run_naive(const GemmParams& p, const GemmOperands& o) {
  if (p.dtype == DType::kF32) {
    naive_gemm(p, static_cast<const float*>(o.a), static_cast<const float*>(o.b), static_cast<float*>(o.c));
  } else if (p.dtype == DType::kF64) {
    naive_gemm(p, static_cast<const double*>(o.a), static_cast<const double*>(o.b), static_cast<double*>(o.c));
  } else {
    return Status::unsupported("fp32 and fp64 only");
  }
  return Status::ok();
}

// The test candidates and how often each ran.
class TestBackend {
 public:
  // Registers the host runtime (timed by the virtual clock) and the named candidates, in the
  // order given.
  RegisterFn registrar(std::vector<std::string> names) {
    return [this, names](Registry& r) {
      testing::register_host_on_virtual_clock(r, clock_);
      for (const auto& n : names) r.list<GemmCandidate>().push_back(candidate(n));
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
  std::atomic<bool> flaky_fails{false};

 private:
  void count(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_[name];
  }
  GemmCandidate candidate(const std::string& name) {
    GemmCandidate c;
    c.name = name;
    c.supports = [](const GemmParams& p) {
      return p.dtype == DType::kF32 || p.dtype == DType::kF64 ? Status::ok() : Status::unsupported("fp32/fp64 only");
    };
    double cost_ms = 0;
    bool wrong = false, flaky = false;
    if (name == "Default") {
      cost_ms = 2.0;
    } else if (name == "Gemm_Fast") {
      cost_ms = 0.3;
    } else if (name == "Gemm_Wrong") {
      cost_ms = 0.01;
      wrong = true;
    } else if (name == "Gemm_Flaky") {
      cost_ms = 0.1;
      flaky = true;
    } else if (name == "Gemm_F64Only") {
      cost_ms = 0.1;
      c.supports = [](const GemmParams& p) {
        return p.dtype == DType::kF64 ? Status::ok() : Status::unsupported("fp64 only");
      };
    } else {
      ADD_FAILURE() << "unknown test candidate " << name;
    }
    c.run = [this, name, cost_ms, wrong, flaky](const GemmParams& p, const GemmOperands& o) -> Status {
      count(name);
      if (flaky && flaky_fails) return Status::internal(name + " lost its device");
      TUNABLEOP_RETURN_IF_ERROR(run_naive(p, o));
      if (wrong) {  // off by one in the first element: a subtle bug, not garbage
        if (p.dtype == DType::kF32) static_cast<float*>(o.c)[0] += 1.0f;
        if (p.dtype == DType::kF64) static_cast<double*>(o.c)[0] += 1.0;
      }
      clock_.fetch_add(cost_ms);
      return Status::ok();
    };
    return c;
  }

  std::mutex mu_;
  std::map<std::string, int> calls_;
  std::atomic<double> clock_{0};
};

const std::vector<std::string> kThree = {"Default", "Gemm_Wrong", "Gemm_Fast"};

ResultEntry entry(std::string op, std::string params, std::string solution, double ms) {
  ResultEntry e;
  e.op = std::move(op);
  e.params = std::move(params);
  e.solution = std::move(solution);
  e.time_ms = ms;
  return e;
}

// Without with_defaults(): lds and strides left at 0 are filled by the caller.
GemmParams raw_shape(DType dt, char ta, char tb, int64_t m, int64_t n, int64_t k) {
  GemmParams p;
  p.dtype = dt;
  p.transa = ta;
  p.transb = tb;
  p.m = m;
  p.n = n;
  p.k = k;
  return p;
}

GemmParams shape(DType dt, char ta, char tb, int64_t m, int64_t n, int64_t k) {
  return raw_shape(dt, ta, tb, m, n, k).with_defaults();
}

// A few problems covering dtypes, transposes, ld > rows, alpha/beta and batches.
std::vector<GemmParams> varied_shapes() {
  GemmParams with_ld = raw_shape(DType::kF64, 'T', 'N', 9, 7, 5);
  with_ld.lda = 8;
  with_ld.ldc = 12;
  with_ld.alpha = -0.5;
  with_ld.beta = 1.5;
  GemmParams batched = raw_shape(DType::kF32, 'N', 'T', 6, 5, 4);
  batched.batch = 3;
  batched.stride_c = 6 * 5 + 3;
  return {shape(DType::kF32, 'N', 'N', 16, 12, 8), with_ld.with_defaults(), batched.with_defaults()};
}

class DispatchTest : public ::testing::Test {
 protected:
  Config config(bool enabled, bool tuning, bool record_untuned = false) {
    Config c = Config::defaults_only();
    EXPECT_TRUE(c.set(Setting::kEnabled, enabled).is_ok());
    EXPECT_TRUE(c.set(Setting::kTuning, tuning).is_ok());
    EXPECT_TRUE(c.set(Setting::kRecordUntuned, record_untuned).is_ok());
    EXPECT_TRUE(c.set(Setting::kFilename, dir_.file("results%d.csv")).is_ok());
    EXPECT_TRUE(c.set(Setting::kUntunedFilename, dir_.file("untuned%d.csv")).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxTuningDurationMs, 4.0).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxTuningIterations, 3).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxWarmupDurationMs, 1.0).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxWarmupIterations, 1).is_ok());
    EXPECT_TRUE(c.set(Setting::kRotatingBufferSize, 0).is_ok());
    EXPECT_TRUE(c.set(Setting::kVerbose, 2).is_ok());
    return c;
  }
  std::unique_ptr<Context> context(Config c, const std::vector<std::string>& names = kThree) {
    auto ctx = std::make_unique<Context>(Device::cpu(), std::move(c), backend_.registrar(names));
    ctx->log().set_sink([this](const std::string& l) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_.push_back(l);
    });
    return ctx;
  }
  bool logged(const std::string& what) {
    std::lock_guard<std::mutex> lock(log_mu_);
    for (const auto& l : log_)
      if (l.find(what) != std::string::npos) return true;
    return false;
  }
  std::string log_text() {
    std::lock_guard<std::mutex> lock(log_mu_);
    std::string s;
    for (const auto& l : log_) s += l + "\n";
    return s;
  }
  // Runs gemm() on fresh random data of p and checks the result against the fp64 reference.
  void gemm_and_check(Context& ctx, const GemmParams& p, uint64_t seed = 1) {
    HostGemmProblem prob = HostGemmProblem::random(p, seed);
    Status st = gemm(ctx, prob.p, GemmOperands{prob.a.data(), prob.b.data(), prob.c.data()});
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_TRUE(matches_reference(prob, prob.c));
  }
  std::string results() const { return dir_.file("results0.csv"); }
  std::string untuned() const { return dir_.file("untuned0.csv"); }

  ScratchDir dir_;
  TestBackend backend_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

TEST_F(DispatchTest, FirstCallTunesAppendsOneLineAndLaterCallsServeIt) {
  auto ctx = context(config(true, true));
  const GemmParams p = varied_shapes()[0];
  gemm_and_check(*ctx, p);
  auto lines = lines_of(results(), true);
  ASSERT_EQ(lines.size(), 1u) << log_text();
  EXPECT_EQ(lines[0].rfind("GemmTunableOp_float_NN,nn_16_12_8,Gemm_Fast,", 0), 0u) << lines[0];
  // Screening, then the failed check; never a warm-up or timed run.
  const int screened = backend_.calls("Gemm_Wrong");
  EXPECT_GE(screened, 2) << "screened and checked";
  gemm_and_check(*ctx, p);
  EXPECT_EQ(backend_.calls("Gemm_Wrong"), screened) << "a wrong candidate is never served";
  EXPECT_TRUE(logged("├──verify numerics failed id=1, GemmTunableOp_float_NN(nn_16_12_8) Gemm_Wrong")) << log_text();
  EXPECT_GT(backend_.calls("Default"), 1);

  backend_.reset();
  gemm_and_check(*ctx, p, 2);
  EXPECT_EQ(backend_.calls("Gemm_Fast"), 1);
  EXPECT_EQ(backend_.calls("Default"), 0);
  EXPECT_EQ(backend_.calls("Gemm_Wrong"), 0);
  EXPECT_EQ(lines_of(results(), true).size(), 1u);

  // Another context (a later run of the program) loads the file and does not tune.
  backend_.reset();
  auto fresh = context(config(true, true));
  gemm_and_check(*fresh, p, 3);
  EXPECT_EQ(backend_.calls("Gemm_Fast"), 1);
  EXPECT_EQ(backend_.calls("Default"), 0);
  EXPECT_EQ(lines_of(results(), true).size(), 1u);
}

TEST_F(DispatchTest, TuningNeverChangesTheCallersResult) {
  // beta != 0, gaps between columns and matrices: the tuner works on copies, and the caller's C
  // gets exactly one GEMM.
  auto ctx = context(config(true, true));
  for (const GemmParams& p : varied_shapes()) {
    SCOPED_TRACE(testing::describe(p));
    gemm_and_check(*ctx, p, 5);
  }
  EXPECT_EQ(lines_of(results(), true).size(), 3u);
}

TEST_F(DispatchTest, WrongCandidateNeverWinsEvenAlone) {
  auto ctx = context(config(true, true), {"Default", "Gemm_Wrong"});
  gemm_and_check(*ctx, varied_shapes()[0]);
  auto lines = lines_of(results(), true);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(",Default,"), std::string::npos) << lines[0];
}

TEST_F(DispatchTest, UnsupportedCandidatesAreSkippedAndStoredOnesRechecked) {
  auto ctx = context(config(true, true), {"Default", "Gemm_F64Only"});
  gemm_and_check(*ctx, varied_shapes()[0]);  // fp32: Gemm_F64Only cannot run it
  EXPECT_EQ(backend_.calls("Gemm_F64Only"), 0);
  EXPECT_TRUE(logged("├──unsupported id=1")) << log_text();
  auto lines = lines_of(results(), true);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(",Default,"), std::string::npos);

  // A stored name that does not support the problem is not run (Default is).
  ScratchDir other;
  Config c = config(true, /*tuning=*/false);
  ASSERT_TRUE(c.set(Setting::kFilename, other.file("r.csv")).is_ok());
  auto ctx2 = context(std::move(c), {"Default", "Gemm_F64Only"});
  ASSERT_TRUE(ctx2->load_results().is_ok());
  const GemmParams p = varied_shapes()[0];
  ctx2->results().insert(entry(gemm_op_signature(p), gemm_params_signature(p), "Gemm_F64Only", 0.001));
  backend_.reset();
  gemm_and_check(*ctx2, p);
  EXPECT_EQ(backend_.calls("Gemm_F64Only"), 0);
  EXPECT_EQ(backend_.calls("Default"), 1);
}

TEST_F(DispatchTest, TuningOffRecordsUntunedProblemsOnceAndRunsDefault) {
  auto ctx = context(config(true, /*tuning=*/false, /*record_untuned=*/true));
  auto shapes = varied_shapes();
  gemm_and_check(*ctx, shapes[0]);
  gemm_and_check(*ctx, shapes[0], 2);
  gemm_and_check(*ctx, shapes[1]);
  EXPECT_EQ(backend_.calls("Default"), 3);
  EXPECT_EQ(backend_.calls("Gemm_Fast"), 0);
  auto lines = lines_of(untuned(), false);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], gemm_op_signature(shapes[0]) + "," + gemm_params_signature(shapes[0]));
  EXPECT_EQ(lines[1], gemm_op_signature(shapes[1]) + "," + gemm_params_signature(shapes[1]));
  EXPECT_TRUE(lines_of(results(), true).empty());
}

TEST_F(DispatchTest, OfflineRoundTrip) {
  auto shapes = varied_shapes();
  {
    auto recorder = context(config(true, false, true));
    for (const auto& p : shapes) gemm_and_check(*recorder, p);
  }
  auto problems = UntunedFile::read(untuned());
  ASSERT_TRUE(problems.is_ok()) << problems.status().to_string();
  ASSERT_EQ(problems->size(), shapes.size());
  {
    // `tunableop tune FILE`: tuning happens whatever kEnabled/kTuning say.
    auto tuner = context(config(false, false));
    for (const auto& [op, params] : *problems) {
      auto p = parse_gemm_signature(op, params);
      ASSERT_TRUE(p.is_ok()) << p.status().to_string();
      auto report = tune_gemm(*tuner, *p);
      ASSERT_TRUE(report.is_ok()) << report.status().to_string();
      EXPECT_EQ(report->winner.op, op);
      EXPECT_EQ(report->winner.params, params);
      EXPECT_EQ(report->winner.solution, "Gemm_Fast") << log_text();
      EXPECT_GT(report->default_median_ms, report->winner.time_ms);
    }
  }
  EXPECT_EQ(lines_of(results(), true).size(), shapes.size());
  backend_.reset();
  auto served = context(config(true, /*tuning=*/false, /*record_untuned=*/true));
  for (const auto& p : shapes) gemm_and_check(*served, p, 9);
  EXPECT_EQ(backend_.calls("Gemm_Fast"), int(shapes.size()));
  EXPECT_EQ(backend_.calls("Default"), 0);
  EXPECT_EQ(lines_of(untuned(), false).size(), shapes.size()) << "tuned problems are not recorded again";
}

TEST_F(DispatchTest, EnabledOffAlwaysRunsDefault) {
  const GemmParams p = varied_shapes()[0];
  {
    auto tuned = context(config(true, true));
    gemm_and_check(*tuned, p);
  }
  backend_.reset();
  auto off = context(config(/*enabled=*/false, /*tuning=*/true, /*record_untuned=*/true));
  gemm_and_check(*off, p);
  gemm_and_check(*off, varied_shapes()[1]);
  EXPECT_EQ(backend_.calls("Default"), 2);
  EXPECT_EQ(backend_.calls("Gemm_Fast"), 0);
  EXPECT_EQ(lines_of(results(), true).size(), 1u);
  EXPECT_FALSE(fs::exists(untuned()));
}

TEST_F(DispatchTest, ForeignSolutionIsNotUsedAndIsRetuned) {
  const GemmParams p = varied_shapes()[0];
  const std::string op = gemm_op_signature(p), ps = gemm_params_signature(p);
  {
    auto writer = context(config(true, true));
    writer->results().insert(entry(op, ps, "Gemm_Rocblas_4365", 0.0123));
    ASSERT_TRUE(writer->write_results(results()).is_ok());
  }
  {
    auto no_tuning = context(config(true, false));
    gemm_and_check(*no_tuning, p);
    EXPECT_EQ(backend_.calls("Default"), 1);
    EXPECT_EQ(backend_.calls("Gemm_Fast"), 0);
  }
  backend_.reset();
  {
    auto tuning = context(config(true, true));
    gemm_and_check(*tuning, p);
    EXPECT_GT(backend_.calls("Gemm_Fast"), 1) << "tuned";
    auto lines = lines_of(results(), true);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0].rfind(op + "," + ps + ",Gemm_Rocblas_4365,", 0), 0u) << "the old line stays";
    EXPECT_EQ(lines[1].rfind(op + "," + ps + ",Gemm_Fast,", 0), 0u);
  }
  backend_.reset();
  auto later = context(config(true, true));
  gemm_and_check(*later, p);
  EXPECT_EQ(backend_.calls("Gemm_Fast"), 1);
  EXPECT_EQ(backend_.calls("Default"), 0);
}

TEST_F(DispatchTest, RunTimeErrorFallsBackToDefaultAndContextStaysUsable) {
  auto ctx = context(config(true, true), {"Default", "Gemm_Flaky"});
  const GemmParams p = varied_shapes()[0];
  gemm_and_check(*ctx, p);
  ASSERT_NE(lines_of(results(), true).at(0).find(",Gemm_Flaky,"), std::string::npos) << log_text();
  backend_.flaky_fails = true;
  backend_.reset();
  gemm_and_check(*ctx, p, 2);
  EXPECT_EQ(backend_.calls("Gemm_Flaky"), 1);
  EXPECT_EQ(backend_.calls("Default"), 1);
  EXPECT_TRUE(logged("Gemm_Flaky failed")) << log_text();
  EXPECT_TRUE(logged("lost its device")) << log_text();
  // Still usable: the same problem, and a new one that gets tuned while Flaky keeps failing.
  gemm_and_check(*ctx, p, 3);
  gemm_and_check(*ctx, varied_shapes()[2], 4);
  auto lines = lines_of(results(), true);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find(",Default,"), std::string::npos) << "a failing candidate cannot win";
}

TEST_F(DispatchTest, ConcurrentCallsTuneOnce) {
  auto ctx = context(config(true, true));
  const GemmParams p = varied_shapes()[0];
  std::vector<HostGemmProblem> probs;
  for (uint64_t t = 0; t < 4; ++t) probs.push_back(HostGemmProblem::random(p, 100 + t));
  std::vector<Status> st(probs.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < probs.size(); ++t)
    threads.emplace_back([&, t] {
      st[t] = gemm(*ctx, probs[t].p, GemmOperands{probs[t].a.data(), probs[t].b.data(), probs[t].c.data()});
    });
  for (auto& t : threads) t.join();
  for (size_t t = 0; t < probs.size(); ++t) {
    EXPECT_TRUE(st[t].is_ok()) << st[t].to_string();
    EXPECT_TRUE(matches_reference(probs[t], probs[t].c));
  }
  EXPECT_EQ(lines_of(results(), true).size(), 1u);
  const int tuned_once = backend_.calls("Gemm_Wrong");
  EXPECT_GE(tuned_once, 2);  // screened and checked, by one tuning only
  EXPECT_TRUE(matches_reference(probs[0], probs[0].c));
}

TEST_F(DispatchTest, LinearIsRowMajorXTimesWTransposed) {
  for (bool tune : {false, true}) {
    auto ctx = context(config(tune, tune));
    const int64_t tokens = 3, in = 7, out = 5;
    std::vector<float> x(tokens * in), w(out * in), y(tokens * out, -1.f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 11) - 5) * 0.25f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 7) - 3) * 0.5f;
    ASSERT_TRUE(linear(*ctx, DType::kF32, tokens, in, out, x.data(), w.data(), y.data()).is_ok());
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t o = 0; o < out; ++o) {
        double want = 0;
        for (int64_t i = 0; i < in; ++i) want += double(x[t * in + i]) * double(w[o * in + i]);
        EXPECT_NEAR(y[t * out + o], want, 1e-5) << "token " << t << " out " << o;
      }
    }
  }
  EXPECT_NE(lines_of(results(), true).at(0).find("GemmTunableOp_float_TN,tn_5_3_7,"), std::string::npos);
}

TEST_F(DispatchTest, LinearFp64) {
  auto ctx = context(config(false, false));
  const int64_t tokens = 2, in = 4, out = 3;
  std::vector<double> x = {1, 2, 3, 4, -1, 0.5, 0, 2};
  std::vector<double> w = {1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1};
  std::vector<double> y(tokens * out);
  ASSERT_TRUE(linear(*ctx, DType::kF64, tokens, in, out, x.data(), w.data(), y.data()).is_ok());
  EXPECT_EQ(y, (std::vector<double>{1, 2, 10, -1, 0.5, 1.5}));
}

TEST_F(DispatchTest, PlanIsValidatedOnceAndServesTheTunedCandidate) {
  auto ctx = context(config(true, true));
  for (const GemmParams& p : varied_shapes()) {
    SCOPED_TRACE(testing::describe(p));
    auto plan = ctx->plan(p);
    ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      HostGemmProblem prob = HostGemmProblem::random(plan->params(), seed);
      Status st = plan->run(GemmOperands{prob.a.data(), prob.b.data(), prob.c.data()});
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      EXPECT_TRUE(matches_reference(prob, prob.c));
    }
    EXPECT_EQ(plan->solution(), "Gemm_Fast");
  }
  EXPECT_EQ(lines_of(results(), true).size(), 3u);
  GemmParams bad = varied_shapes()[0];
  bad.lda = 1;
  EXPECT_EQ(ctx->plan(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(GemmCandidates, OrderEffortDeviceAndFamilies) {
  auto make = [](std::string name, int effort = 0, DeviceKind dev = DeviceKind::kCpu) {
    GemmCandidate c;
    c.name = std::move(name);
    c.min_effort = effort;
    c.device = dev;
    c.supports = [](const GemmParams&) { return Status::ok(); };
    c.run = [](const GemmParams&, const GemmOperands&) { return Status::ok(); };
    return c;
  };
  Context ctx(Device::cpu(), Config::defaults_only(), [&](Registry& r) {
    register_cpu_runtime(r);
    auto& l = r.list<GemmCandidate>();
    l.push_back(make("Gemm_A"));
    l.push_back(make("Default"));  // registered late, still offered first
    l.push_back(make("Gemm_Exhaustive", 2));
    l.push_back(make("Gemm_Cuda", 0, DeviceKind::kCuda));
    GemmCandidateFamily fam;
    fam.prefix = "Gemm_Fam_";
    fam.device = DeviceKind::kCpu;
    fam.min_effort = 1;
    fam.expand = [make](const GemmParams&, int effort) {
      std::vector<GemmCandidate> v{make("Gemm_Fam_1")};
      if (effort >= 2) v.push_back(make("Gemm_Fam_2"));
      return v;
    };
    fam.resolve = [make](const GemmParams&, const std::string& name) -> StatusOr<GemmCandidate> {
      if (name == "Gemm_Fam_1" || name == "Gemm_Fam_2") return make(name);
      return Status::not_found("gone: " + name);
    };
    r.list<GemmCandidateFamily>().push_back(fam);
  });
  GemmParams p = shape(DType::kF32, 'N', 'N', 4, 4, 4);
  auto names = [&](int effort) {
    std::vector<std::string> out;
    for (const auto& c : gemm_candidates_for(ctx, p, effort)) out.push_back(c.name);
    return out;
  };
  EXPECT_EQ(names(0), (std::vector<std::string>{"Default", "Gemm_A"}));
  EXPECT_EQ(names(1), (std::vector<std::string>{"Default", "Gemm_A", "Gemm_Fam_1"}));
  EXPECT_EQ(names(2), (std::vector<std::string>{"Default", "Gemm_A", "Gemm_Exhaustive", "Gemm_Fam_1", "Gemm_Fam_2"}));
  EXPECT_TRUE(find_gemm_candidate(ctx, p, "Gemm_A").is_ok());
  EXPECT_TRUE(find_gemm_candidate(ctx, p, "Gemm_Fam_2").is_ok());
  EXPECT_EQ(find_gemm_candidate(ctx, p, "Gemm_Fam_9").status().code(), StatusCode::kNotFound);
  auto missing = find_gemm_candidate(ctx, p, "Gemm_Rocblas_4365");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("Gemm_Rocblas_4365"), std::string::npos);
  EXPECT_EQ(find_gemm_candidate(ctx, p, "Gemm_Cuda").status().code(), StatusCode::kNotFound)
      << "a CUDA candidate is not offered to a CPU context";
}

TEST(GemmCandidates, NoDefaultIsReportedNotCrashed) {
  Context ctx(Device::cpu(), Config::defaults_only(), [](Registry& r) { register_cpu_runtime(r); });
  std::vector<float> a(4), b(4), c(4);
  Status st = gemm(ctx, shape(DType::kF32, 'N', 'N', 2, 2, 2), GemmOperands{a.data(), b.data(), c.data()});
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("Default"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tunableop
