// The in-context check on a fake workload: problems whose chosen solution costs a known number
// of fake milliseconds, and a "spinning pool" penalty that a choice adds to the problem run
// after it (what tuning alone never sees). The check must keep the choices that help, drop the
// ones that lose in context, and record the dropped ones as Default with a note.
#include "tunableop/in_context.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "backends/cpu_runtime.h"
#include "fake_problem.h"
#include "results_test_util.h"

namespace tunableop {
namespace {

const std::string kOp = "GemmTunableOp_float_NN";

struct FakeStep {
  std::string params;
  double default_ms;  // Default's cost
  std::string tuned;  // the tuned choice (stored in the results)
  double tuned_ms;    // its cost alone
  double penalty_ms;  // what it adds to the next step (its threads still spinning there)
};

class FakeWorkload {
 public:
  FakeWorkload(Context& ctx, testing::FakeClock& clock, std::vector<FakeStep> steps)
      : ctx_(ctx), clock_(clock), steps_(std::move(steps)) {}

  // One pass: each step asks the context what to run (as a plan revalidation would) and costs
  // the chosen solution's time plus the previous step's penalty.
  Status operator()() {
    ++runs;
    double carry = 0;
    for (const auto& s : steps_) {
      auto chosen = ctx_.choose(
          kOp, s.params, [](const std::string&) { return true; },
          [] {
            return StatusOr<std::unique_ptr<TuningProblem>>(
                Status::internal("the workload was tuned before the check"));
          });
      if (!chosen.is_ok()) return chosen.status();
      const bool tuned = *chosen == s.tuned;
      clock_.now += (tuned ? s.tuned_ms : s.default_ms) + carry;
      carry = tuned ? s.penalty_ms : 0;
    }
    return Status::ok();
  }
  int runs = 0;

 private:
  Context& ctx_;
  testing::FakeClock& clock_;
  std::vector<FakeStep> steps_;
};

struct Harness {
  explicit Harness(std::vector<FakeStep> steps)
      : ctx(Device::cpu(), config(), [](Registry& r) { register_cpu_runtime(r); }),
        timer(clock, 0.0),
        workload(ctx, clock, steps) {
    for (const auto& s : steps) {
      ResultEntry e;
      e.op = kOp;
      e.params = s.params;
      e.solution = s.tuned;
      e.time_ms = s.tuned_ms;
      e.default_ms = s.default_ms;  // what the tuner measured for Default alongside
      EXPECT_TRUE(ctx.store_result(e, false).is_ok());
    }
  }
  Config config() {
    Config c = Config::defaults_only();
    EXPECT_TRUE(c.set(Setting::kEnabled, true).is_ok());
    EXPECT_TRUE(c.set(Setting::kTuning, true).is_ok());
    EXPECT_TRUE(c.set(Setting::kFilename, dir.file("results%d.csv")).is_ok());
    return c;
  }
  StatusOr<InContextReport> check(InContextPolicy p = {}) {
    return check_in_context(
        ctx, [this] { return workload(); }, p, &timer);
  }
  std::string solution(const std::string& params) {
    auto e = ctx.results().lookup(kOp, params);
    return e ? e->solution : "(none)";
  }
  testing::TempDir dir;
  Context ctx;
  testing::FakeClock clock;
  testing::FakeTimer timer;
  FakeWorkload workload;
};

TEST(InContext, KeepsEveryChoiceWhenTunedWinsAsAWhole) {
  Harness h(
      {{"nn_1_1_1", 2.0, "Fast", 1.0, 0.0}, {"nn_2_2_2", 2.0, "Fast", 1.5, 0.0}, {"nn_3_3_3", 1.0, "Default", 1.0, 0}});
  auto r = h.check();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->choices, 2u);  // the Default choice is not a tuned choice
  EXPECT_EQ(r->kept, 2u);
  EXPECT_TRUE(r->dropped.empty());
  EXPECT_NEAR(r->ratio_before, 3.5 / 5.0, 1e-9);  // 1 + 1.5 + 1 against 2 + 2 + 1
  EXPECT_EQ(h.solution("nn_1_1_1"), "Fast");
  EXPECT_EQ(h.solution("nn_2_2_2"), "Fast");
  // One run to learn the problems, then one comparison of 5 rounds x 2 sides.
  EXPECT_EQ(r->workload_runs, 1 + 2 * 5);
  EXPECT_NE(r->summary().find("kept 2 of 2"), std::string::npos) << r->summary();
}

TEST(InContext, DropsTheChoiceThatLosesInContextAndRecordsDefault) {
  // Step 2's choice wins alone (1.0 vs 2.0) but its spinning threads cost step 3 another 3 ms.
  Harness h({{"nn_1_1_1", 2.0, "Fast", 1.0, 0.0},
             {"nn_2_2_2", 2.0, "Spinner", 1.0, 3.0},
             {"nn_3_3_3", 1.0, "Default", 1.0, 0}});
  auto r = h.check();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->choices, 2u);
  EXPECT_EQ(r->kept, 1u);
  ASSERT_EQ(r->dropped.size(), 1u);
  EXPECT_EQ(r->dropped[0].solution, "Spinner");
  EXPECT_NEAR(r->ratio_before, 6.0 / 5.0, 1e-9);  // tuned 1 + 1 + (1 + 3) against 2 + 2 + 1
  EXPECT_NEAR(r->ratio_after, 4.0 / 5.0, 1e-9);
  EXPECT_EQ(h.solution("nn_1_1_1"), "Fast");
  EXPECT_EQ(h.solution("nn_2_2_2"), "Default");

  // The file: the tuned line, then a replacing Default line (the later line wins on load); the
  // sidecar says why.
  const std::string path = h.ctx.results_path();
  const std::string text = testing::read_text(path);
  EXPECT_NE(text.find(kOp + ",nn_2_2_2,Spinner,"), std::string::npos) << text;
  EXPECT_NE(text.find(kOp + ",nn_2_2_2,Default,"), std::string::npos) << text;
  EXPECT_LT(text.find(",nn_2_2_2,Spinner,"), text.find(",nn_2_2_2,Default,"));
  const std::string stats = testing::read_text(path + ".stats");
  EXPECT_NE(stats.find("Spinner lost in the whole workload"), std::string::npos) << stats;
  auto contents = read_results_file(path);
  ASSERT_TRUE(contents.is_ok());
  bool found = false;
  for (const auto& e : contents->report.entries) {
    if (e.params != "nn_2_2_2" || e.solution != "Default") continue;
    found = true;
    EXPECT_NE(e.note.find("in-context check"), std::string::npos);
    EXPECT_DOUBLE_EQ(e.time_ms, 2.0) << "Default's own time, not the dropped choice's 1.0";
  }
  EXPECT_TRUE(found);

  // A fresh context reading the file runs Default there.
  Context again(Device::cpu(), h.config(), [](Registry& reg) { register_cpu_runtime(reg); });
  ASSERT_TRUE(again.load_results().is_ok());
  auto e = again.results().lookup(kOp, "nn_2_2_2");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->solution, "Default");
}

TEST(InContext, DropsEverythingWhenNoSubsetWins) {
  // Each choice is faster alone and slows the next step by more than it saved.
  Harness h({{"nn_1_1_1", 2.0, "A", 1.8, 0.5}, {"nn_2_2_2", 2.0, "B", 1.8, 0.5}, {"nn_3_3_3", 1.0, "Default", 1.0, 0}});
  auto r = h.check();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->kept, 0u);
  EXPECT_EQ(r->dropped.size(), 2u);
  EXPECT_EQ(r->ratio_after, 1.0);
  EXPECT_EQ(h.solution("nn_1_1_1"), "Default");
  EXPECT_EQ(h.solution("nn_2_2_2"), "Default");
}

TEST(InContext, NoTunedChoicesCostsOneRun) {
  Harness h({{"nn_1_1_1", 1.0, "Default", 1.0, 0}});
  auto r = h.check();
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->choices, 0u);
  EXPECT_EQ(r->workload_runs, 1);
  EXPECT_EQ(h.workload.runs, 1);
}

TEST(InContext, DryRunLeavesTheFileAlone) {
  Harness h({{"nn_1_1_1", 2.0, "Spinner", 1.0, 5.0}, {"nn_2_2_2", 1.0, "Default", 1.0, 0}});
  InContextPolicy p;
  p.write = false;
  auto r = h.check(p);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->kept, 0u);
  EXPECT_EQ(h.solution("nn_1_1_1"), "Default");  // in memory
  EXPECT_EQ(testing::read_text(h.ctx.results_path()).find("nn_1_1_1,Default,"), std::string::npos);
}

TEST(InContext, AFailingWorkloadPutsTheTunedChoicesBack) {
  Harness h({{"nn_1_1_1", 2.0, "Fast", 1.0, 0.0}});
  int calls = 0;
  auto r = check_in_context(
      h.ctx,
      [&]() -> Status {
        if (++calls > 2) return Status::internal("planted workload failure");
        return h.workload();
      },
      {}, &h.timer);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("planted"), std::string::npos);
  EXPECT_EQ(h.solution("nn_1_1_1"), "Fast");
}

TEST(InContext, RefusesZeroRounds) {
  Harness h({{"nn_1_1_1", 2.0, "Fast", 1.0, 0.0}});
  InContextPolicy p;
  p.rounds = 0;
  auto r = h.check(p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("rounds"), std::string::npos);
}

}  // namespace
}  // namespace tunableop
