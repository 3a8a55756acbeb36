// Tuning memory against what is free (issue 33, findings 2 and 3), with a fake free-memory source:
// the rotating copies shrink to what fits, a problem whose one set of copies does not fit is not
// tuned (ResourceExhausted naming the sizes), and a context tries such a problem once: Default
// serves it, it goes to the untuned file for offline tuning, and verbose 1 says so once, however
// often the context's generation moves afterwards. Also: a first call whose inputs hold NaN/Inf
// is tuned on random numbers instead of failing every candidate. The same rules hold on a GPU
// with cudaMemGetInfo as the source (tests/backends/cuda/cuda_tuning_memory_test.cc).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu_runtime.h"
#include "backends/register_all.h"
#include "core/results_test_util.h"
#include "ops/gemm/dispatch.h"
#include "ops/gemm/tuning_problem.h"
#include "support/gemm_testing.h"
#include "tunableop/context.h"

namespace tunableop {
namespace {

using testing::HostGemmProblem;
using testing::TempDir;

GemmParams square(int64_t n) {
  GemmParams p;
  p.m = p.n = p.k = n;
  return p.with_defaults();
}

GemmCandidate reference_candidate(const std::string& name) {
  GemmCandidate c;
  c.name = name;
  c.supports = [](const GemmParams&) { return Status::ok(); };
  c.run = [](const GemmParams& p, const GemmOperands& o) {
    const std::vector<double> r = gemm_reference_f64(p, o.a, o.b, o.c);
    for (size_t i = 0; i < r.size(); ++i) static_cast<float*>(o.c)[i] = float(r[i]);
    return Status::ok();
  };
  return c;
}

struct Tuned {
  StatusOr<std::unique_ptr<GemmTuningProblem>> problem;
  std::vector<std::string> log;
};

// A GEMM tuning problem whose runtime says `free_bytes` are free; rotating copies asked for:
// 64 MiB (many sets of this small problem).
Tuned make_problem(const HostGemmProblem& prob, uint64_t free_bytes) {
  Registry reg;
  register_cpu_runtime(reg);
  static DeviceRuntime rt;  // the problem keeps a reference
  rt = *reg.runtime(DeviceKind::kCpu);
  rt.free_memory_bytes = [free_bytes] { return free_bytes; };
  TuningPolicy pol;
  pol.rotating_buffer_mib = 64;
  std::vector<std::string> lines;
  static Logger log;
  log.set_level(2);
  log.set_sink([&lines](const std::string& l) { lines.push_back(l); });
  auto problem =
      GemmTuningProblem::create(prob.p, GemmOperands{prob.a.data(), prob.b.data(), const_cast<uint8_t*>(prob.c.data())},
                                {reference_candidate("Default"), reference_candidate("Gemm_Other")}, rt, pol, log);
  log.set_sink([](const std::string&) {});
  return Tuned{std::move(problem), std::move(lines)};
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

bool logged(const std::vector<std::string>& log, const std::string& what) {
  for (const auto& l : log)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

TEST(TuningMemory, RotatingCopiesShrinkToWhatIsFree) {
  HostGemmProblem prob = HostGemmProblem::random(square(128), 1);
  const uint64_t set = 3 * 128 * 128 * sizeof(float);  // A, B, C: 192 KiB
  Tuned plenty = make_problem(prob, uint64_t(1) << 40);
  ASSERT_TRUE(plenty.problem.is_ok()) << plenty.problem.status().to_string();
  EXPECT_EQ((*plenty.problem)->rotation_count(), ops::BufferedTuningProblem::kMaxSets);  // 64 MiB wanted: capped at 64

  // Room for 3 sets within three quarters of what is free: 3 rotating copies, said at verbose 2.
  Tuned three = make_problem(prob, (3 * set + set / 2) * 4 / 3 + 64);
  ASSERT_TRUE(three.problem.is_ok()) << three.problem.status().to_string();
  EXPECT_EQ((*three.problem)->rotation_count(), 3u);
  EXPECT_TRUE(logged(three.log, "3 rotating copies instead of 64")) << joined(three.log);
  EXPECT_LE((*three.problem)->bytes_allocated(), (3 * set + set / 2) * 4 / 3 + 64);

  // Not even one set: no tuning, and the message names what it needed and what was free.
  Tuned none = make_problem(prob, set);
  ASSERT_FALSE(none.problem.is_ok());
  EXPECT_EQ(none.problem.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(none.problem.status().message().find("192.0 KiB"), std::string::npos) << none.problem.status().message();
  EXPECT_NE(none.problem.status().message().find("free on the host"), std::string::npos);
}

// A context whose CPU runtime reports `free` bytes free (the rest of the CPU backends as usual).
RegisterFn with_free_memory(std::shared_ptr<std::atomic<uint64_t>> free) {
  return [free](Registry& r) {
    Registry cpu;
    register_cpu_runtime(cpu);
    DeviceRuntime rt = *cpu.runtime(DeviceKind::kCpu);
    rt.free_memory_bytes = [free] { return free->load(); };
    r.add_runtime(rt);  // first: the one Registry::runtime() finds
    register_all_backends(r);
  };
}

// Tuning on, the results and untuned files in `dir`, short measurements, verbose 1.
Config quick_tuning(const TempDir& dir) {
  Config cfg = Config::defaults_only();
  for (const Status& st :
       {cfg.set(Setting::kEnabled, true), cfg.set(Setting::kFilename, dir.file("r%d.csv")),
        cfg.set(Setting::kUntunedFilename, dir.file("u%d.csv")), cfg.set(Setting::kMaxTuningIterations, 2),
        cfg.set(Setting::kMaxWarmupIterations, 1), cfg.set(Setting::kVerbose, 1)})
    EXPECT_TRUE(st.is_ok()) << st.to_string();
  return cfg;
}

TEST(TuningMemory, AProblemThatDoesNotFitIsTriedOnceRecordedAndServedByDefault) {
  TempDir dir;
  auto free = std::make_shared<std::atomic<uint64_t>>(uint64_t(1) << 40);
  Context ctx(Device::cpu(), quick_tuning(dir), with_free_memory(free));
  std::vector<std::string> log;
  ctx.log().set_sink([&](const std::string& l) { log.push_back(l); });

  // 96 x 96 x 96 fp32 needs 108 KiB for one set: 64 KiB free (48 usable) cannot hold it.
  free->store(64 << 10);
  const GemmParams big = square(96);
  HostGemmProblem prob = HostGemmProblem::random(big, 2);
  for (int call = 0; call < 4; ++call) {
    prob.reset_c();
    ASSERT_TRUE(gemm(ctx, big, GemmOperands{prob.a.data(), prob.b.data(), prob.c.data()}).is_ok());
    EXPECT_TRUE(testing::matches_reference(prob, prob.c)) << "call " << call;
    if (call == 1) {
      // Another problem tuned meanwhile (it fits): the context's generation moves, and the big
      // one must not be tried again.
      free->store(uint64_t(1) << 40);
      HostGemmProblem small = HostGemmProblem::random(square(8), 3);
      ASSERT_TRUE(gemm(ctx, small.p, GemmOperands{small.a.data(), small.b.data(), small.c.data()}).is_ok());
      free->store(64 << 10);
    }
  }
  EXPECT_EQ(ctx.tuning_failure(gemm_op_signature(big), gemm_params_signature(big)).code(),
            StatusCode::kResourceExhausted);
  EXPECT_FALSE(ctx.results().contains(gemm_op_signature(big), gemm_params_signature(big)));
  int said = 0;
  for (const auto& l : log) said += l.find("cannot tune GemmTunableOp_float_NN(nn_96_96_96) here") != std::string::npos;
  EXPECT_EQ(said, 1) << joined(log);
  EXPECT_TRUE(logged(log, "recorded in " + dir.file("u0.csv"))) << joined(log);
  EXPECT_NE(testing::read_text(dir.file("u0.csv")).find("GemmTunableOp_float_NN,nn_96_96_96"), std::string::npos);
  // The plan says why Default runs (the interposer counts it as "too large to tune").
  auto plan = ctx.plan(big);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  auto d = plan->decide(GemmOperands{prob.a.data(), prob.b.data(), prob.c.data()});
  ASSERT_TRUE(d.is_ok() && *d != nullptr);
  EXPECT_EQ((*d)->source, ChoiceSource::kDidNotFit);
  // With the memory back, a new context (a new process) tunes it.
  free->store(uint64_t(1) << 40);
  EXPECT_TRUE(tune_gemm(ctx, big).is_ok());
}

TEST(TuningMemory, AStaleResultWhoseReTuningDoesNotFitIsSaidOnce) {
  // A stored solution this machine does not have is re-tuned; when that re-tuning cannot fit,
  // Default serves the problem and neither the "re-tuning" warning nor the attempt repeats when
  // the context's generation moves (every other problem's new result moves it).
  TempDir dir;
  auto free = std::make_shared<std::atomic<uint64_t>>(64 << 10);
  Context ctx(Device::cpu(), quick_tuning(dir), with_free_memory(free));
  std::vector<std::string> log;
  ctx.log().set_sink([&](const std::string& l) { log.push_back(l); });
  const GemmParams big = square(96);
  ResultEntry stale;
  stale.op = gemm_op_signature(big);
  stale.params = gemm_params_signature(big);
  stale.solution = "Gemm_NotOnThisMachine";
  stale.time_ms = 1;
  ctx.results().insert(stale);
  HostGemmProblem prob = HostGemmProblem::random(big, 5);
  for (int call = 0; call < 3; ++call) {
    prob.reset_c();
    ASSERT_TRUE(gemm(ctx, big, GemmOperands{prob.a.data(), prob.b.data(), prob.c.data()}).is_ok());
    EXPECT_TRUE(testing::matches_reference(prob, prob.c)) << "call " << call;
    ResultEntry other = stale;  // moves the generation: the plan decides again
    other.params = "nn_1_1_" + std::to_string(call + 1);
    ctx.results().insert(other);
  }
  int retuning = 0, cannot = 0;
  for (const auto& l : log) {
    retuning += l.find("Gemm_NotOnThisMachine") != std::string::npos && l.find("re-tuning") != std::string::npos;
    cannot += l.find("cannot tune GemmTunableOp_float_NN(nn_96_96_96) here") != std::string::npos;
  }
  EXPECT_EQ(retuning, 1) << joined(log);
  EXPECT_EQ(cannot, 1) << joined(log);
  EXPECT_EQ(ctx.results().lookup(stale.op, stale.params)->solution, "Gemm_NotOnThisMachine") << "kept, not replaced";
}

TEST(TuningMemory, NonFiniteInputsOfTheFirstCallAreTunedOnRandomNumbers) {
  // A program's first call of a shape may carry NaN or Inf: Default's output fails the check
  // then, and the shape was marked "tuning failed" for the process (issue 33).
  TempDir dir;
  Context ctx(Device::cpu(), quick_tuning(dir));
  ctx.log().set_sink([](const std::string&) {});
  GemmParams p = square(24);
  p.beta = 0.5;  // C is an input too
  HostGemmProblem prob = HostGemmProblem::random(p, 4);
  static_cast<float*>(static_cast<void*>(prob.a.data()))[3] = std::numeric_limits<float>::quiet_NaN();
  static_cast<float*>(static_cast<void*>(prob.c.data()))[5] = std::numeric_limits<float>::infinity();
  const std::vector<uint8_t> a_before = prob.a;
  ASSERT_TRUE(gemm(ctx, p, GemmOperands{prob.a.data(), prob.b.data(), prob.c.data()}).is_ok());
  EXPECT_TRUE(ctx.results().contains(gemm_op_signature(p), gemm_params_signature(p)));
  EXPECT_TRUE(ctx.tuning_failure(gemm_op_signature(p), gemm_params_signature(p)).is_ok());
  EXPECT_EQ(prob.a, a_before) << "the caller's inputs are never changed";
  EXPECT_TRUE(std::isnan(static_cast<float*>(static_cast<void*>(prob.c.data()))[3 % 24]) ||
              std::isinf(static_cast<float*>(static_cast<void*>(prob.c.data()))[5]))
      << "the call itself computed on its own data";
}

}  // namespace
}  // namespace tunableop
