// The tuning protocol against a fake clock: every candidate "runs" by advancing the clock by its
// cost, so budgets, pruning, the margin rule and failure handling are checked exactly.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/fake_problem.h"
#include "tunableop/tuner.h"

namespace tunableop {
namespace {

using testing::counting_policy;
using testing::FakeCandidate;
using testing::FakeProblem;

struct Run {
  StatusOr<TuningReport> report;
  std::vector<std::string> log;
};

Run tune(FakeProblem& pr, const TuningPolicy& pol, int verbose = 3) {
  Logger log;
  log.set_level(verbose);
  std::vector<std::string> lines;
  log.set_sink([&](const std::string& l) { lines.push_back(l); });
  Tuner tuner(pol, log);
  auto r = tuner.find_fastest(pr);
  return {std::move(r), std::move(lines)};
}

const CandidateReport* outcome(const TuningReport& r, const std::string& name) {
  const CandidateReport* found = nullptr;
  for (const auto& c : r.candidates) {
    if (c.name != name) continue;
    EXPECT_EQ(found, nullptr) << name << " is reported more than once";
    found = &c;
  }
  return found;
}

bool has_line(const std::vector<std::string>& lines, const std::string& prefix, const std::string& contains = "") {
  for (const auto& l : lines)
    if (l.rfind(prefix, 0) == 0 && l.find(contains) != std::string::npos) return true;
  return false;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

const int kScreenRuns = TuningPolicy{}.screen_runs_1 + TuningPolicy{}.screen_runs_2;

TEST(Summarize, Statistics) {
  Measurement empty = summarize({});
  EXPECT_EQ(empty.runs, 0);
  Measurement one = summarize({2.5});
  EXPECT_EQ(one.runs, 1);
  EXPECT_DOUBLE_EQ(one.min_ms, 2.5);
  EXPECT_DOUBLE_EQ(one.median_ms, 2.5);
  EXPECT_DOUBLE_EQ(one.mean_ms, 2.5);
  EXPECT_DOUBLE_EQ(one.std_ms, 0);
  Measurement odd = summarize({3, 1, 2});
  EXPECT_EQ(odd.runs, 3);
  EXPECT_DOUBLE_EQ(odd.min_ms, 1);
  EXPECT_DOUBLE_EQ(odd.median_ms, 2);
  EXPECT_DOUBLE_EQ(odd.mean_ms, 2);
  EXPECT_DOUBLE_EQ(odd.std_ms, 1);  // sample standard deviation
  Measurement even = summarize({4, 1, 10, 2});
  EXPECT_DOUBLE_EQ(even.median_ms, 3);
  EXPECT_DOUBLE_EQ(even.min_ms, 1);
  EXPECT_DOUBLE_EQ(even.mean_ms, 4.25);
  EXPECT_NEAR(even.std_ms, 4.0311288741492746, 1e-12);
}

TEST(Tuner, FewerContestantsThanFinalistsNeedNoHalving) {
  FakeProblem pr({{"Default", 1.0}, {"A", 0.8}});
  auto r = tune(pr, counting_policy());  // no re-measurement: the screening estimates decide
  ASSERT_TRUE(r.report.is_ok()) << r.report.status().to_string();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(pr.runs(i), 1 + kScreenRuns) << "sizing run + screening, nothing more; " << i;
    EXPECT_EQ(pr.checks(i), 1);
  }
  EXPECT_FALSE(has_line(r.log, "├──halving round")) << joined(r.log);
  EXPECT_EQ(r.report->winner.solution, "A");
}

TEST(Tuner, ShortRunsAreBatchedButTheIterationBudgetHolds) {
  // 0.125 ms per run against a 0.5 ms minimum sample: four runs per sample (binary-exact values).
  FakeProblem pr({{"Default", 0.125}}, /*min_sample_ms=*/0.5);
  TuningPolicy pol = counting_policy();
  pol.max_tuning_iters = 10;
  auto r = tune(pr, pol);
  ASSERT_TRUE(r.report.is_ok());
  EXPECT_EQ(pr.runs(0), 1 + kScreenRuns * 4);
  EXPECT_DOUBLE_EQ(r.report->winner.time_ms, 0.125);  // per run, not per sample
  EXPECT_EQ(r.report->winner.stats->runs, kScreenRuns);
}

TEST(Tuner, RemeasurementRespectsTheBudgets) {
  std::vector<FakeCandidate> cands = {{"Default", 1.0}, {"A", 0.7}, {"B", 0.75}, {"C", 0.72}};
  for (int64_t iters : {1, 10, 100}) {
    FakeProblem pr(cands);
    TuningPolicy pol = counting_policy();
    pol.remeasure_rounds = 7;
    pol.remeasure_ms = 1e9;  // every round, whatever the fake costs
    pol.finalists = 3;       // every candidate is a finalist: no halving
    pol.max_tuning_iters = iters;
    pol.max_tuning_ms = 20;
    auto r = tune(pr, pol);
    ASSERT_TRUE(r.report.is_ok());
    for (size_t i = 0; i < cands.size(); ++i) {
      int first_pass = 1 + kScreenRuns;
      int remeasured = pr.runs(i) - first_pass;
      EXPECT_GE(remeasured, pol.remeasure_rounds) << "one run per round at least; iters " << iters;
      EXPECT_LE(remeasured, std::max<int64_t>(iters, pol.remeasure_rounds)) << cands[i].name << " iters " << iters;
      EXPECT_LE(remeasured * cands[i].cost_ms, std::max(pol.max_tuning_ms, pol.remeasure_rounds * cands[i].cost_ms))
          << cands[i].name << " iters " << iters;
    }
    EXPECT_EQ(r.report->winner.solution, "A");
  }
}

TEST(Tuner, ScreeningPrunesSlowCandidatesEarly) {
  FakeProblem pr({{"Default", 1.0},
                  {"Fast", 0.5},
                  {"TwiceAsSlow", 1.0},     // 2x the best: dropped after the first screen
                  {"ThirtyPercent", 0.65},  // 1.3x: passes 1.5x, dropped at 1.15x
                  {"TenPercent", 0.55}});   // 1.1x: survives both
  TuningPolicy pol = counting_policy();
  pol.screen_runs_2 = 2;  // the second cut in screening (by default the halving rounds make it)
  auto r = tune(pr, pol);
  ASSERT_TRUE(r.report.is_ok());
  EXPECT_EQ(pr.runs(2), 1 + pol.screen_runs_1);  // sizing run + first screen
  EXPECT_EQ(pr.runs(3), 1 + pol.screen_runs_1 + pol.screen_runs_2);
  EXPECT_EQ(pr.runs(4), 1 + pol.screen_runs_1 + pol.screen_runs_2);
  EXPECT_EQ(outcome(*r.report, "TwiceAsSlow")->outcome, CandidateReport::Outcome::kSkippedSlow);
  EXPECT_EQ(outcome(*r.report, "ThirtyPercent")->outcome, CandidateReport::Outcome::kSkippedSlow);
  EXPECT_EQ(outcome(*r.report, "TenPercent")->outcome, CandidateReport::Outcome::kTimed);
  EXPECT_TRUE(
      has_line(r.log, "├──skip slow instance id=2, GemmTunableOp_float_NN(nn_8_8_8) TwiceAsSlow", "> 1.5x best"))
      << joined(r.log);
  EXPECT_TRUE(
      has_line(r.log, "├──skip slow instance id=3, GemmTunableOp_float_NN(nn_8_8_8) ThirtyPercent", "> 1.15x best"))
      << joined(r.log);
  EXPECT_FALSE(has_line(r.log, "├──skip slow instance id=4"));
  EXPECT_EQ(r.report->winner.solution, "Fast");
}

TEST(Tuner, TheSecondCutHappensInTheHalvingByDefault) {
  FakeProblem pr({{"Default", 1.0}, {"Fast", 0.5}, {"ThirtyPercent", 0.65}, {"TenPercent", 0.55}});
  TuningPolicy pol = counting_policy();
  pol.finalists = 3;  // room for all three: only the ratio cuts
  pol.max_warmup_ms = 0;
  auto r = tune(pr, pol);
  ASSERT_TRUE(r.report.is_ok());
  EXPECT_FALSE(has_line(r.log, "├──skip slow instance")) << joined(r.log);
  // Three contestants for three places: no halving round, so nothing is cut; the re-measure
  // (off here) and the margin decide.
  EXPECT_EQ(outcome(*r.report, "ThirtyPercent")->outcome, CandidateReport::Outcome::kTimed);
  pol.finalists = 2;
  FakeProblem again({{"Default", 1.0}, {"Fast", 0.5}, {"ThirtyPercent", 0.65}, {"TenPercent", 0.55}});
  r = tune(again, pol);
  ASSERT_TRUE(r.report.is_ok());
  EXPECT_EQ(outcome(*r.report, "ThirtyPercent")->outcome, CandidateReport::Outcome::kHalved);
  EXPECT_TRUE(has_line(r.log, "├──halved out in round 1 id=2")) << joined(r.log);
  EXPECT_EQ(r.report->winner.solution, "Fast");
}

TEST(Tuner, ScreeningThresholdsComeFromThePolicy) {
  FakeProblem pr({{"Default", 1.0}, {"Fast", 0.5}, {"TwiceAsSlow", 1.0}});
  TuningPolicy pol = counting_policy();
  pol.screen_ratio_1 = 3.0;  // 2x passes the first screen now
  pol.screen_ratio_2 = 2.5;  // and the second
  auto r = tune(pr, pol);
  ASSERT_TRUE(r.report.is_ok());
  EXPECT_EQ(outcome(*r.report, "TwiceAsSlow")->outcome, CandidateReport::Outcome::kTimed);
  EXPECT_EQ(pr.runs(2), 1 + kScreenRuns);
}

TEST(Tuner, DefaultIsNeverScreenedOut) {
  FakeProblem pr({{"Default", 10.0}, {"Fast", 1.0}});
  auto r = tune(pr, counting_policy());
  ASSERT_TRUE(r.report.is_ok());
  EXPECT_EQ(outcome(*r.report, "Default")->outcome, CandidateReport::Outcome::kTimed);
  EXPECT_DOUBLE_EQ(r.report->default_median_ms, 10.0);
}

TEST(Tuner, MarginRuleKeepsDefaultUnlessClearlyBeaten) {
  {
    FakeProblem pr({{"Default", 1.0}, {"OnePercent", 0.99}});
    TuningPolicy pol = counting_policy();
    pol.min_improvement = 0.02;
    auto r = tune(pr, pol);
    ASSERT_TRUE(r.report.is_ok());
    EXPECT_EQ(r.report->winner.solution, "Default");
    EXPECT_DOUBLE_EQ(r.report->winner.time_ms, 1.0);
    EXPECT_TRUE(has_line(r.log, "├──keeping Default: OnePercent")) << joined(r.log);
  }
  {
    FakeProblem pr({{"Default", 1.0}, {"FivePercent", 0.95}});
    TuningPolicy pol = counting_policy();
    pol.min_improvement = 0.02;
    auto r = tune(pr, pol);
    ASSERT_TRUE(r.report.is_ok());
    EXPECT_EQ(r.report->winner.solution, "FivePercent");
    EXPECT_NEAR(r.report->winner.time_ms, 0.95, 1e-12);
    EXPECT_FALSE(has_line(r.log, "├──keeping Default"));
  }
  {
    FakeProblem pr({{"Default", 1.0}, {"OnePercent", 0.99}});
    TuningPolicy pol = counting_policy();
    pol.min_improvement = 0;  // any improvement counts
    auto r = tune(pr, pol);
    ASSERT_TRUE(r.report.is_ok());
    EXPECT_EQ(r.report->winner.solution, "OnePercent");
  }
}

TEST(Tuner, WrongButFastCandidateNeverWinsAndNeverPrunes) {
  FakeProblem pr({{"Default", 1.0},
                  {"Wrong", 0.1, Status::ok(), /*numerics_ok=*/false},
                  {"Fast", 0.6},
                  {"Second", 0.62}});  // would be pruned if Wrong's 0.1 ms counted as "best"
  auto r = tune(pr, counting_policy());
  ASSERT_TRUE(r.report.is_ok());
  EXPECT_EQ(r.report->winner.solution, "Fast");
  EXPECT_EQ(outcome(*r.report, "Wrong")->outcome, CandidateReport::Outcome::kNumericsFailed);
  // Screening runs come before the check (survivors only pay for it); no warm-up or timing after.
  EXPECT_LE(pr.runs(1), 1 + kScreenRuns * 1000) << "a wrong candidate is only screened";
  EXPECT_NE(outcome(*r.report, "Wrong")->outcome, CandidateReport::Outcome::kTimed);
  EXPECT_EQ(pr.checks(1), 1);
  EXPECT_EQ(outcome(*r.report, "Fast")->outcome, CandidateReport::Outcome::kTimed);
  EXPECT_EQ(outcome(*r.report, "Second")->outcome, CandidateReport::Outcome::kTimed);
  EXPECT_TRUE(has_line(r.log, "├──verify numerics failed id=1, GemmTunableOp_float_NN(nn_8_8_8) Wrong"))
      << joined(r.log);
  EXPECT_FALSE(has_line(r.log, "├──skip slow instance"));
}

TEST(Tuner, WithoutTheNumericsCheckNothingIsVerified) {
  FakeProblem pr({{"Default", 1.0}, {"Wrong", 0.1, Status::ok(), false}});
  TuningPolicy pol = counting_policy();
  pol.numerical_check = false;
  auto r = tune(pr, pol);
  ASSERT_TRUE(r.report.is_ok());
  EXPECT_EQ(pr.checks(0) + pr.checks(1), 0);
  EXPECT_EQ(r.report->winner.solution, "Wrong");  // the documented cost of turning it off
}

TEST(Tuner, DefaultFailingNumericsIsAnError) {
  FakeProblem pr({{"Default", 1.0, Status::ok(), false}, {"A", 0.5}});
  auto r = tune(pr, counting_policy());
  ASSERT_FALSE(r.report.is_ok());
  EXPECT_EQ(r.report.status().code(), StatusCode::kNumericsMismatch);
  EXPECT_NE(r.report.status().message().find("Default"), std::string::npos);
}

TEST(Tuner, UnsupportedCandidatesAreSkipped) {
  FakeProblem pr({{"Default", 1.0}, {"NotHere", 0.1, Status::unsupported("needs avx512")}, {"Fast", 0.5}});
  auto r = tune(pr, counting_policy());
  ASSERT_TRUE(r.report.is_ok());
  EXPECT_EQ(pr.runs(1), 0);
  EXPECT_EQ(pr.checks(1), 0);
  const CandidateReport* c = outcome(*r.report, "NotHere");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->outcome, CandidateReport::Outcome::kUnsupported);
  EXPECT_EQ(c->detail, "needs avx512");
  EXPECT_TRUE(has_line(r.log, "├──unsupported id=1, GemmTunableOp_float_NN(nn_8_8_8) NotHere")) << joined(r.log);
  EXPECT_EQ(r.report->winner.solution, "Fast");
}

TEST(Tuner, DefaultUnsupportedIsAnError) {
  FakeProblem pr({{"Default", 1.0, Status::unsupported("no")}, {"A", 0.5}});
  auto r = tune(pr, counting_policy());
  ASSERT_FALSE(r.report.is_ok());
  EXPECT_NE(r.report.status().message().find("Default"), std::string::npos);
}

TEST(Tuner, DefaultFailingToRunIsAnError) {
  FakeCandidate def{"Default", 1.0};
  def.fail_on_run = 2;  // its screening run
  FakeProblem pr({def, {"A", 0.5}});
  auto r = tune(pr, counting_policy());
  ASSERT_FALSE(r.report.is_ok());
  EXPECT_NE(r.report.status().message().find("planted failure"), std::string::npos);
}

TEST(Tuner, FailingCandidateIsReportedAndTuningGoesOn) {
  FakeCandidate in_screening{"FailsInScreening", 0.5};
  in_screening.fail_on_run = 2;  // its screening run
  FakeCandidate in_halving{"FailsInHalving", 0.7};
  in_halving.fail_on_run = 1 + kScreenRuns + 2;  // the second run of the first halving round
  // Four contestants for two finalists' places: one halving round at least.
  FakeProblem pr({{"Default", 1.0}, in_screening, in_halving, {"Fast", 0.65}, {"Near", 0.7}, {"Close", 0.72}});
  auto r = tune(pr, counting_policy());
  ASSERT_TRUE(r.report.is_ok()) << r.report.status().to_string();
  EXPECT_EQ(r.report->winner.solution, "Fast");
  for (size_t i : {1, 2}) {
    const CandidateReport* c = outcome(*r.report, pr.candidate_name(i));
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->outcome, CandidateReport::Outcome::kFailed);
    EXPECT_NE(c->detail.find("planted failure"), std::string::npos) << c->detail;
    EXPECT_TRUE(has_line(r.log, "├──failed id=" + std::to_string(i) + ",")) << joined(r.log);
  }
  EXPECT_EQ(pr.runs(1), in_screening.fail_on_run) << "not run again after failing";
  EXPECT_EQ(pr.runs(2), in_halving.fail_on_run);
  EXPECT_EQ(pr.recovers(), 2);
  EXPECT_EQ(outcome(*r.report, "Fast")->outcome, CandidateReport::Outcome::kTimed);
}

TEST(Tuner, CandidateFailingInRemeasurementIsDroppedOnce) {
  TuningPolicy pol = counting_policy();
  pol.remeasure_rounds = 7;
  pol.remeasure_ms = 1e9;  // every round, whatever the fake costs
  FakeCandidate flaky{"Flaky", 0.5};
  flaky.fail_on_run = 1 + kScreenRuns + 1;  // first run after its first pass
  FakeProblem pr({{"Default", 1.0}, flaky, {"Steady", 0.55}});
  auto r = tune(pr, pol);
  ASSERT_TRUE(r.report.is_ok()) << r.report.status().to_string();
  EXPECT_EQ(r.report->winner.solution, "Steady") << joined(r.log);
  EXPECT_EQ(pr.runs(1), flaky.fail_on_run) << "a failed candidate must not be run in later rounds";
  EXPECT_EQ(pr.recovers(), 1);
  const CandidateReport* c = outcome(*r.report, "Flaky");  // reported exactly once
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->outcome, CandidateReport::Outcome::kFailed);
}

TEST(Tuner, ProblemBudgetStopsTryingNewCandidates) {
  std::vector<FakeCandidate> cands;
  for (int i = 0; i < 8; ++i) {
    std::string name = "C";
    name += std::to_string(i);
    cands.push_back({i == 0 ? std::string("Default") : name, 1.0 - 0.04 * i});
  }
  FakeProblem pr(cands);
  TuningPolicy pol = counting_policy();
  pol.max_problem_ms = 10;  // a candidate costs ~5 ms to qualify here: room for two or three
  auto r = tune(pr, pol);
  ASSERT_TRUE(r.report.is_ok());
  int tried = 0, over = 0, probed_over = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    const CandidateReport* c = outcome(*r.report, cands[i].name);
    ASSERT_NE(c, nullptr) << cands[i].name;
    if (c->outcome == CandidateReport::Outcome::kOverBudget) {
      ++over;
      // The budget may run out after a candidate's sizing run: it leaves without its screening
      // sample (issue 33). Every later one is not even probed.
      EXPECT_EQ(pr.checks(i), 0) << cands[i].name;
      EXPECT_LE(pr.runs(i), 1) << cands[i].name;
      if (pr.started_at(i) != -1) {
        EXPECT_EQ(++probed_over, 1) << cands[i].name << " probed after the budget";
      }
    } else {
      EXPECT_EQ(over, 0) << "candidates are tried in order until the budget is gone";
      ++tried;
      EXPECT_LE(pr.started_at(i), pol.max_problem_ms) << cands[i].name << " started after the budget";
    }
  }
  EXPECT_GE(tried, 2);
  EXPECT_GE(over, 1);
  EXPECT_TRUE(has_line(r.log, "├──over the problem budget")) << joined(r.log);
  EXPECT_EQ(r.report->winner.solution, cands[size_t(tried - 1)].name);  // the fastest one tried
}

TEST(Tuner, DefaultIsTriedEvenWithoutBudget) {
  FakeProblem pr({{"Default", 1.0}, {"A", 0.5}});
  TuningPolicy pol = counting_policy();
  pol.max_problem_ms = 1;
  auto r = tune(pr, pol);
  ASSERT_TRUE(r.report.is_ok());
  EXPECT_EQ(r.report->winner.solution, "Default");
  EXPECT_EQ(outcome(*r.report, "A")->outcome, CandidateReport::Outcome::kOverBudget);
}

TEST(Tuner, NoisyTimingsStillFindTheFastest) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    std::vector<FakeCandidate> cands = {{"Default", 1.0}, {"B", 0.8}, {"A", 0.7}, {"C", 0.76}};
    for (auto& c : cands) c.noise = 0.05;
    FakeProblem pr(cands, 0.05, seed);
    TuningPolicy pol = counting_policy();
    pol.remeasure_rounds = 7;
    pol.remeasure_ms = 1e9;  // every round, whatever the fake costs
    pol.max_tuning_ms = 30;
    auto r = tune(pr, pol);
    ASSERT_TRUE(r.report.is_ok());
    EXPECT_EQ(r.report->winner.solution, "A") << "seed " << seed;
    EXPECT_NEAR(r.report->winner.time_ms, 0.7, 0.7 * 0.05);
  }
}

TEST(Tuner, MediansResistLuckyRuns) {
  // "Lucky" usually takes 1.0 ms but every 10th run 0.5 ms (mean 0.95 ms); the minimum of its
  // samples would beat "Steady" at 0.9 ms, its median (and mean) do not.
  FakeCandidate lucky{"Lucky", 1.0};
  lucky.lucky_every = 10;
  lucky.lucky_cost_ms = 0.5;
  FakeProblem pr({{"Default", 1.2}, lucky, {"Steady", 0.9}});
  TuningPolicy pol = counting_policy();
  pol.max_tuning_iters = 100;
  pol.remeasure_rounds = 7;
  pol.remeasure_ms = 1e9;  // every round, whatever the fake costs
  auto r = tune(pr, pol);
  ASSERT_TRUE(r.report.is_ok());
  EXPECT_GE(pr.runs(1), 10);  // it did get lucky at least once
  EXPECT_EQ(r.report->winner.solution, "Steady");
}

TEST(Tuner, ReportDescribesTheWinner) {
  FakeProblem pr({{"Default", 1.0}, {"A", 0.5}});
  auto r = tune(pr, counting_policy());
  ASSERT_TRUE(r.report.is_ok());
  const TuningReport& rep = *r.report;
  EXPECT_EQ(rep.winner.op, "GemmTunableOp_float_NN");
  EXPECT_EQ(rep.winner.params, "nn_8_8_8");
  EXPECT_EQ(rep.winner.solution, "A");
  EXPECT_DOUBLE_EQ(rep.winner.time_ms, 0.5);
  ASSERT_TRUE(rep.winner.stats.has_value());
  EXPECT_EQ(rep.winner.stats->runs, kScreenRuns);  // the screening samples: no halving, no re-measurement
  EXPECT_DOUBLE_EQ(rep.winner.stats->min_ms, 0.5);
  EXPECT_DOUBLE_EQ(rep.winner.stats->median_ms, 0.5);
  EXPECT_DOUBLE_EQ(rep.winner.stats->mean_ms, 0.5);
  EXPECT_NEAR(rep.winner.stats->std_ms, 0, 1e-12);
  EXPECT_DOUBLE_EQ(rep.default_median_ms, 1.0);
  EXPECT_DOUBLE_EQ(rep.winner.tuning_ms, pr.now());  // every fake millisecond was spent tuning
  EXPECT_EQ(rep.candidates.size(), 2u);
  // Runs go round the input copies.
  EXPECT_EQ(pr.rotations().size(), pr.rotation_count());
}

TEST(Tuner, TreeLogFollowsTheSeedFormat) {
  FakeProblem pr({{"Default", 1.0}, {"NotHere", 0.1, Status::unsupported("no")}, {"Fast", 0.5}, {"Slow", 2.0}});
  auto r = tune(pr, counting_policy(), /*verbose=*/3);
  ASSERT_TRUE(r.report.is_ok());
  ASSERT_GE(r.log.size(), 4u);
  EXPECT_EQ(r.log.front(), "finding fastest for GemmTunableOp_float_NN(nn_8_8_8) out of 4 candidates");
  EXPECT_TRUE(has_line(r.log, "├──unsupported id=1, GemmTunableOp_float_NN(nn_8_8_8) NotHere"));
  EXPECT_TRUE(has_line(r.log, "├──skip slow instance id=3, GemmTunableOp_float_NN(nn_8_8_8) Slow"));
  EXPECT_TRUE(has_line(r.log, "├──found better instance id=2.", "Fast"));
  EXPECT_TRUE(has_line(r.log, "├──verify numerics passed id=2, Fast"));
  EXPECT_EQ(r.log.back().rfind("└──found fastest for GemmTunableOp_float_NN(nn_8_8_8) Fast", 0), 0u) << r.log.back();
  // Every line between the first and the last belongs to the tree.
  for (size_t i = 1; i + 1 < r.log.size(); ++i)
    EXPECT_TRUE(r.log[i].rfind("├──", 0) == 0 || r.log[i].rfind("│", 0) == 0) << r.log[i];
}

TEST(Tuner, VerboseLevelsFilterTheTree) {
  std::vector<FakeCandidate> cands = {{"Default", 1.0}, {"NotHere", 0.1, Status::unsupported("no")}, {"Fast", 0.5}};
  {
    FakeProblem pr(cands);
    EXPECT_TRUE(tune(pr, counting_policy(), 0).log.empty());
  }
  {
    FakeProblem pr(cands);
    auto lines = tune(pr, counting_policy(), 1).log;
    ASSERT_EQ(lines.size(), 2u) << joined(lines);
    EXPECT_EQ(lines[0].rfind("finding fastest for", 0), 0u);
    EXPECT_EQ(lines[1].rfind("└──found fastest for", 0), 0u);
  }
  {
    FakeProblem pr(cands);
    auto lines = tune(pr, counting_policy(), 2).log;
    EXPECT_TRUE(has_line(lines, "├──unsupported id=1"));
    EXPECT_FALSE(has_line(lines, "├──verify numerics passed"));  // level 3 only
  }
}

}  // namespace
}  // namespace tunableop
