// serve(): what the interposer decides for a problem, on a CPU registry of test candidates with
// results files in a scratch directory (no preload involved). Plus the candidate that runs the
// program's own BLAS, checked against the fp64 reference.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu_runtime.h"
#include "core/results_test_util.h"
#include "interpose/engine.h"
#include "interpose/map_blas.h"
#include "interpose/program_blas.h"
#include "interpose/serve.h"
#include "ops/gemm/reference.h"
#include "support/gemm_testing.h"

extern "C" void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);
extern "C" void cblas_dgemm(int, int, int, int, int, int, double, const double*, int, const double*, int, double,
                            double*, int);
extern "C" void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                       const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);
extern "C" void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*,
                       const int*, const double*, const int*, const double*, double*, const int*, size_t, size_t);

namespace tunableop::interpose {
namespace {

std::vector<std::string> entry_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.rfind("Validator,", 0) != 0) out.push_back(line);
  return out;
}

// A correct candidate (the fp64 reference, written back) that counts its runs; `declines`
// makes it answer "unsupported" at run time instead.
GemmCandidate reference_candidate(const std::string& name, std::atomic<int>* runs, bool declines = false) {
  GemmCandidate c;
  c.name = name;
  c.device = DeviceKind::kCpu;
  c.supports = [](const GemmParams& p) {
    return p.dtype == DType::kF64 ? Status::ok() : Status::unsupported("fp64 only");
  };
  c.run = [runs, declines](const GemmParams& p, const GemmOperands& o) -> Status {
    if (runs) ++*runs;
    if (declines) return Status::unsupported("declines these operands");
    std::vector<double> ref = gemm_reference_f64(p, o.a, o.b, o.c);
    for (int64_t i = 0; i < p.c_span(); ++i) store_from_double(p.dtype, o.c, i, ref[size_t(i)]);
    return Status::ok();
  };
  return c;
}

struct Fixture {
  testing::TempDir dir;
  std::atomic<int> default_runs{0}, winner_runs{0}, program_runs{0}, declining_runs{0};
  DeviceEngine dev;

  explicit Fixture(bool tuning, bool record = false) {
    dev.device = Device::cpu();
    dev.ctx = new Context(Device::cpu(), Config::defaults_only(), [this](Registry& r) {
      register_cpu_runtime(r);
      auto& l = r.list<GemmCandidate>();
      l.push_back(reference_candidate("Default", &default_runs));
      l.push_back(reference_candidate("Gemm_Winner", &winner_runs));
      l.push_back(reference_candidate(kProgramBlasName, &program_runs));
      l.push_back(reference_candidate("Gemm_Declines", &declining_runs, true));
    });
    Config& c = dev.ctx->config();
    EXPECT_TRUE(c.set(Setting::kEnabled, true).is_ok());
    EXPECT_TRUE(c.set(Setting::kTuning, tuning).is_ok());
    EXPECT_TRUE(c.set(Setting::kRecordUntuned, record).is_ok());
    EXPECT_TRUE(c.set(Setting::kFilename, dir.file("results%d.csv")).is_ok());
    EXPECT_TRUE(c.set(Setting::kUntunedFilename, dir.file("untuned%d.csv")).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxTuningDurationMs, 1.0).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxWarmupDurationMs, 1.0).is_ok());
    EXPECT_TRUE(c.set(Setting::kRotatingBufferSize, 0).is_ok());
    dev.options = c.snapshot();
    EXPECT_TRUE(dev.ctx->load_results().is_ok());
  }
  ~Fixture() { delete dev.ctx; }

  void store(const GemmParams& p, const std::string& solution) {
    ResultEntry e;
    e.op = gemm_op_signature(p);
    e.params = gemm_params_signature(p);
    e.solution = solution;
    e.time_ms = 0.01;
    dev.ctx->results().insert(e);
  }
};

// A column-major dgemm of the given size through the mapping, with its reference check.
struct Call {
  testing::HostGemmProblem prob;
  GemmParams p;
  GemmOperands ops;
  explicit Call(int64_t m, int64_t n, int64_t k) {
    GemmParams q;
    q.dtype = DType::kF64;
    q.m = m;
    q.n = n;
    q.k = k;
    q.beta = 0.5;
    prob = testing::HostGemmProblem::random(q, 7);
    BlasCall c;
    c.api = Api::kCblasDgemm;
    c.order = 102;
    c.transa = c.transb = 111;
    c.m = int(m);
    c.n = int(n);
    c.k = int(k);
    c.alpha = 1;
    c.beta = 0.5;
    c.a = prob.a.data();
    c.lda = int(m);
    c.b = prob.b.data();
    c.ldb = int(k);
    c.c = prob.c.data();
    c.ldc = int(m);
    EXPECT_EQ(map_blas_call(c, &p, &ops), Reason::kServed);
  }
  Outcome serve(DeviceEngine& dev) {
    prob.reset_c();
    return serve_gemm(dev, p, ops, CallSite{});
  }
};

TEST(Serve, StoredWinnerRunsAndTheDecisionFollowsTheResults) {
  Fixture f(/*tuning=*/false);
  Call call(9, 5, 7);
  f.store(call.p, "Gemm_Winner");
  Outcome o = call.serve(f.dev);
  EXPECT_EQ(o.reason, Reason::kServed);
  EXPECT_EQ(f.winner_runs, 1);
  EXPECT_TRUE(testing::matches_reference(call.prob, call.prob.c));
  EXPECT_EQ(call.serve(f.dev).reason, Reason::kServed);
  EXPECT_EQ(f.winner_runs, 2);
  EXPECT_EQ(f.default_runs, 0);
  // The problem's plan decides again when the results change, as every plan does.
  f.store(call.p, "Default");
  EXPECT_EQ(call.serve(f.dev).reason, Reason::kServed);
  EXPECT_EQ(f.default_runs, 1);
  f.dev.ctx->results().clear();
  EXPECT_EQ(call.serve(f.dev).reason, Reason::kNotTuned);
  EXPECT_EQ(f.winner_runs + f.default_runs, 3);
}

TEST(Serve, ProgramBlasWinnerGoesBackToTheLibraryUntouched) {
  Fixture f(false);
  Call call(9, 5, 7);
  f.store(call.p, kProgramBlasName);
  EXPECT_EQ(call.serve(f.dev).reason, Reason::kLibraryDefault);
  EXPECT_EQ(f.program_runs + f.winner_runs + f.default_runs, 0);
}

TEST(Serve, StoredDefaultRunsOurDefaultOnTheCpu) {
  Fixture f(false);
  Call call(4, 4, 4);
  f.store(call.p, "Default");
  EXPECT_EQ(call.serve(f.dev).reason, Reason::kServed);
  EXPECT_EQ(f.default_runs, 1);
}

TEST(Serve, MissWithTuningOffPassesThroughAndRecords) {
  Fixture f(/*tuning=*/false, /*record=*/true);
  Call call(6, 3, 2);
  EXPECT_EQ(call.serve(f.dev).reason, Reason::kNotTuned);
  EXPECT_EQ(call.serve(f.dev).reason, Reason::kNotTuned);
  EXPECT_EQ(f.winner_runs + f.default_runs + f.program_runs, 0);
  auto lines = entry_lines(f.dir.file("untuned0.csv"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "GemmTunableOp_double_NN,nn_6_3_2");
}

TEST(Serve, MissWithTuningOnTunesOnceThenServes) {
  Fixture f(/*tuning=*/true);
  Call call(8, 8, 8);
  Outcome first = call.serve(f.dev);
  EXPECT_TRUE(first.reason == Reason::kServed || first.reason == Reason::kLibraryDefault) << reason_text(first.reason);
  if (first.reason == Reason::kServed) {
    EXPECT_TRUE(testing::matches_reference(call.prob, call.prob.c));
  }
  EXPECT_EQ(entry_lines(f.dir.file("results0.csv")).size(), 1u);
  int runs_after_tuning = f.default_runs + f.winner_runs + f.program_runs;
  Outcome second = call.serve(f.dev);
  EXPECT_EQ(second.reason, first.reason);
  EXPECT_LE(f.default_runs + f.winner_runs + f.program_runs, runs_after_tuning + 1);  // one run, no tuning
  EXPECT_EQ(entry_lines(f.dir.file("results0.csv")).size(), 1u);
}

// A call site that can replay the program's call (CallSite::replay): the fp64 reference on the
// buffers it is given, counted; or a failure.
struct ProgramCall {
  GemmParams p;
  bool fails = false;
  std::atomic<int> runs{0};
  static Status replay(const void* what, const void* a, const void* b, void* c) {
    auto* self = const_cast<ProgramCall*>(static_cast<const ProgramCall*>(what));
    ++self->runs;
    if (self->fails) return Status::device_error("replay refused");
    std::vector<double> ref = gemm_reference_f64(self->p, a, b, c);
    for (int64_t i = 0; i < self->p.c_span(); ++i) store_from_double(self->p.dtype, c, i, ref[size_t(i)]);
    return Status::ok();
  }
  CallSite site() const { return CallSite{false, nullptr, nullptr, 0, &ProgramCall::replay, this}; }
};

TEST(Serve, TuningTimesTheProgramsOwnCallAsDefault) {
  Fixture f(/*tuning=*/true);
  Call call(8, 8, 8);
  ProgramCall program;
  program.p = call.p;
  call.prob.reset_c();
  Outcome o = serve_gemm(f.dev, call.p, call.ops, program.site());
  EXPECT_TRUE(o.reason == Reason::kServed || o.reason == Reason::kLibraryDefault) << reason_text(o.reason);
  EXPECT_GT(program.runs, 0);    // Default, measured and the numerics reference, was the program's call
  EXPECT_LE(f.default_runs, 1);  // ours never stood in for it (one run serves the call if it won)
  EXPECT_EQ(entry_lines(f.dir.file("results0.csv")).size(), 1u);
}

TEST(Serve, AReplayThatFailsFallsBackToOurDefault) {
  Fixture f(/*tuning=*/true);
  Call call(8, 8, 8);
  ProgramCall program;
  program.p = call.p;
  program.fails = true;
  call.prob.reset_c();
  Outcome o = serve_gemm(f.dev, call.p, call.ops, program.site());
  EXPECT_TRUE(o.reason == Reason::kServed || o.reason == Reason::kLibraryDefault) << reason_text(o.reason);
  EXPECT_GT(program.runs, 0);
  EXPECT_GT(f.default_runs, 1);  // ours stood in while tuning
  EXPECT_EQ(entry_lines(f.dir.file("results0.csv")).size(), 1u);
}

TEST(Serve, CandidateThatDeclinesTheOperandsPassesThrough) {
  Fixture f(false);
  Call call(5, 5, 5);
  f.store(call.p, "Gemm_Declines");
  EXPECT_EQ(call.serve(f.dev).reason, Reason::kCandidateDeclined);
  EXPECT_EQ(f.declining_runs, 1);
}

TEST(Serve, ThreadsTuneEachProblemOnce) {
  Fixture f(true);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        Call call(3 + (i + t) % 3, 4, 5);
        Outcome o = call.serve(f.dev);
        if (o.reason != Reason::kServed && o.reason != Reason::kLibraryDefault) ++bad;
        if (o.reason == Reason::kServed && !testing::matches_reference(call.prob, call.prob.c)) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(entry_lines(f.dir.file("results0.csv")).size(), 3u);
}

// The program's BLAS as a candidate: this test binary links libblas.so.3.
TEST(ProgramBlasCandidate, MatchesTheReferenceThroughCblasAndFortran) {
  ProgramBlas with_cblas{reinterpret_cast<void*>(&cblas_sgemm), reinterpret_cast<void*>(&cblas_dgemm), nullptr,
                         nullptr};
  ProgramBlas fortran_only{nullptr, nullptr, reinterpret_cast<void*>(&sgemm_), reinterpret_cast<void*>(&dgemm_)};
  for (const ProgramBlas& fns : {with_cblas, fortran_only}) {
    GemmCandidate c = make_program_blas_candidate(fns);
    EXPECT_EQ(c.name, kProgramBlasName);
    for (DType dt : {DType::kF32, DType::kF64}) {
      for (const GemmParams& shape : testing::random_gemm_shapes(dt, 5, 12, /*with_batches=*/false)) {
        auto prob = testing::HostGemmProblem::random(shape, 3);
        ASSERT_TRUE(c.supports(prob.p).is_ok()) << testing::describe(prob.p);
        ASSERT_TRUE(c.run(prob.p, {prob.a.data(), prob.b.data(), prob.c.data()}).is_ok());
        EXPECT_TRUE(testing::matches_reference(prob, prob.c)) << testing::describe(prob.p);
      }
    }
    GemmParams batched;
    batched.m = batched.n = batched.k = 4;
    batched.batch = 2;
    EXPECT_TRUE(c.supports(batched.with_defaults()).is_unsupported());
    GemmParams half;
    half.dtype = DType::kBF16;
    half.m = half.n = half.k = 4;
    EXPECT_TRUE(c.supports(half.with_defaults()).is_unsupported());
  }
}

}  // namespace
}  // namespace tunableop::interpose
