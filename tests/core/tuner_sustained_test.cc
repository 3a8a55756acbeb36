// Sustained timing (src/core/tuner_sustained.cc) on a fake GPU that drops its frequency after N
// ms of load, as a real one does at its power cap. "Boosty" is 10% faster than Default at the
// boost clock and 9% slower at the cap (it draws more power, so the cap costs it more): chosen
// by short bursts, it loses in a workload that keeps the device at its cap. Long problems must
// time their final rounds under sustained load and keep Default; short ones keep the fast path;
// the heat stays within its budget and ends early once the device reports its limit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/fake_problem.h"
#include "core/tuning_session.h"
#include "tunableop/tuner.h"

namespace tunableop {
namespace {

using testing::FakeCandidate;
using testing::FakeProblem;

// The fake device leaves its boost clock this long after the first run: later than a burst-timed
// tuning of the problems below ends (about 70 fake ms), sooner than a sustained one's heat does.
constexpr double kBoostMs = 120;

struct Tuned {
  ResultEntry winner;
  std::vector<std::string> log;
  double end_ms = 0;  // fake time when tuning ended
  bool logged(const std::string& what) const {
    for (const auto& l : log)
      if (l.find(what) != std::string::npos) return true;
    return false;
  }
  std::string all() const {
    std::string s;
    for (const auto& l : log) s += l + "\n";
    return s;
  }
};

TuningPolicy sustained_policy(double min_call_ms = 0.5, double heat_ms = 200) {
  TuningPolicy p;
  p.sustained_min_call_ms = min_call_ms;
  p.sustained_heat_ms = heat_ms;
  return p;
}

// Default: 1.0 ms at boost, 1.15 at the cap (its time follows the clock, 1980 / 1755 MHz).
// Boosty: 0.9 ms at boost, 1.25 at the cap.
std::vector<FakeCandidate> boost_only_winner(double scale = 1.0) {
  FakeCandidate def("Default", 1.0 * scale);
  FakeCandidate boosty("Boosty", 0.9 * scale);
  boosty.hot_cost_ms = 1.25 * scale;
  return {def, boosty};
}

Tuned tune(std::vector<FakeCandidate> cands, const TuningPolicy& pol, double boost_ms = kBoostMs,
           bool reports_clock = true, bool gpu = true) {
  FakeProblem pr(std::move(cands));
  pr.clock().gpu = gpu;
  pr.clock().boost_ms = boost_ms;
  pr.clock().reports_clock = reports_clock;
  Logger log;
  log.set_level(3);
  Tuned t;
  log.set_sink([&](const std::string& l) { t.log.push_back(l); });
  auto r = Tuner(pol, log).find_fastest(pr);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  if (r.is_ok()) t.winner = r->winner;
  t.end_ms = pr.now();
  return t;
}

TEST(TunerSustained, BurstTimingChoosesTheCandidateThatWinsOnlyWhileBoosted) {
  // The model bites: with sustained timing off, the whole tuning sees the boost clock.
  Tuned t = tune(boost_only_winner(), sustained_policy(/*min_call_ms=*/1e9));
  EXPECT_EQ(t.winner.solution, "Boosty") << t.all();
  EXPECT_EQ(t.winner.final_rounds, "burst");
  EXPECT_DOUBLE_EQ(t.winner.sm_mhz, 1980);
  EXPECT_LT(t.end_ms, kBoostMs) << "the burst-timed tuning must end before the fake device drops its clock";
}

TEST(TunerSustained, ACandidateThatWinsOnlyWhileBoostedLosesUnderSustainedLoad) {
  Tuned t = tune(boost_only_winner(), sustained_policy());
  EXPECT_EQ(t.winner.solution, "Default") << t.all();
  EXPECT_EQ(t.winner.final_rounds, "sustained");
  EXPECT_DOUBLE_EQ(t.winner.sm_mhz, 1755) << "the rounds ran at the capped clock";
  EXPECT_DOUBLE_EQ(t.winner.power_w, 700);
  EXPECT_TRUE(t.logged("├──sustained final rounds (Default 1 ms a call >= 0.5 ms)")) << t.all();
  EXPECT_TRUE(t.logged("until the clock settled at a limit: SM 1980 MHz, 500 W -> SM 1755 MHz, 700 W")) << t.all();
  EXPECT_TRUE(t.logged("keeping Default over Boosty")) << t.all();
  EXPECT_TRUE(t.logged("; sustained final rounds at SM 1755 MHz, 700 W]")) << t.all();
  // The heat ended soon after the clock dropped (two rounds to see it settle), not at its budget.
  EXPECT_LT(t.end_ms, kBoostMs + 100) << t.all();
}

TEST(TunerSustained, ACandidateFasterAtTheCapStillWins) {
  FakeCandidate def("Default", 1.0);
  FakeCandidate better("Better", 0.8);
  better.hot_cost_ms = 0.95;  // 17% faster than Default's 1.15 at the cap
  Tuned t = tune({def, better}, sustained_policy());
  EXPECT_EQ(t.winner.solution, "Better") << t.all();
  EXPECT_EQ(t.winner.final_rounds, "sustained");
  EXPECT_NEAR(t.winner.time_ms, 0.95, 1e-9) << "its time is the one at the cap";
}

TEST(TunerSustained, ShortProblemsKeepTheFastPath) {
  // Default's call (0.01 ms) is under the threshold: no heat, the rounds are timed in bursts.
  Tuned t = tune(boost_only_winner(0.01), sustained_policy(/*min_call_ms=*/0.1));
  EXPECT_EQ(t.winner.final_rounds, "burst") << t.all();
  EXPECT_FALSE(t.logged("sustained final rounds")) << t.all();
  EXPECT_EQ(t.winner.solution, "Boosty") << "a short problem keeps what the fast path finds";
  EXPECT_LT(t.end_ms, 60) << "no heat was paid";
}

TEST(TunerSustained, TheHostClockKeepsTheFastPath) {
  // A CPU problem of any length: the host timer does not slow under load.
  Tuned t = tune(boost_only_winner(), sustained_policy(), kBoostMs, true, /*gpu=*/false);
  EXPECT_EQ(t.winner.final_rounds, "burst");
  EXPECT_DOUBLE_EQ(t.winner.sm_mhz, 0) << "no device clock to read";
  EXPECT_FALSE(t.logged("sustained final rounds")) << t.all();
}

TEST(TunerSustained, WithoutClockReadingsTheHeatRunsItsWholeBudgetAndNoLonger) {
  // No NVML: nothing says the clock settled, so the heat lasts sustained_heat_ms (plus the round
  // that crosses it); the rounds are still timed at the cap and the readings stay unknown.
  const TuningPolicy pol = sustained_policy(0.5, /*heat_ms=*/200);
  Tuned burst = tune(boost_only_winner(), sustained_policy(1e9), kBoostMs, /*reports_clock=*/false);
  Tuned t = tune(boost_only_winner(), pol, kBoostMs, /*reports_clock=*/false);
  EXPECT_EQ(t.winner.solution, "Default") << t.all();
  EXPECT_EQ(t.winner.final_rounds, "sustained");
  EXPECT_DOUBLE_EQ(t.winner.sm_mhz, 0);
  EXPECT_DOUBLE_EQ(t.winner.power_w, 0);
  EXPECT_TRUE(t.logged("until the heat budget ran out: clock unknown (no NVML) -> clock unknown (no NVML)")) << t.all();
  // What sustained timing costs: the heat budget and one round over it (a round here: about
  // 2 finalists x 4.3 ms, at the cap); the counted rounds cost what they did. Default's rounds
  // run at the cap (15% longer), hence the slack.
  const double round_ms = 2 * (30.0 / 7) * 1.25;
  EXPECT_GE(t.end_ms - burst.end_ms, pol.sustained_heat_ms - round_ms) << t.all();
  EXPECT_LE(t.end_ms - burst.end_ms, pol.sustained_heat_ms + 2 * round_ms + 0.2 * burst.end_ms) << t.all();
}

TEST(TunerSustained, ADeviceAlreadyAtItsCapIsHeatedOnlyUntilItsClockReadsSteady) {
  // Hot from the first run (the previous problem's load): the reading before the heat and the
  // one after its first round both say limit and the same clock, and the rounds count.
  Tuned t = tune(boost_only_winner(), sustained_policy(0.5, 200), /*boost_ms=*/0);
  EXPECT_EQ(t.winner.solution, "Default") << t.all();
  EXPECT_TRUE(t.logged("in 1 round, until the clock settled at a limit")) << t.all();
}

TEST(TunerSustained, TheHeatStaysWithinTheProblemsBudget) {
  // No NVML (the heat would run its whole 1 s) and a problem budget of 150 ms: the heat stops
  // at what is left of it (plus the round that crosses it).
  TuningPolicy pol = sustained_policy(0.5, /*heat_ms=*/1000);
  pol.max_problem_ms = 150;
  Tuned t = tune(boost_only_winner(), pol, kBoostMs, /*reports_clock=*/false);
  EXPECT_EQ(t.winner.final_rounds, "sustained");
  EXPECT_LT(t.end_ms, 150 + 2 * 2 * (30.0 / 7) * 1.25 + 80) << "heat, then the counted rounds" << t.all();
}

TEST(TunerSustained, NoHeatWhenItsBudgetIsZero) {
  Tuned t = tune(boost_only_winner(), sustained_policy(0.5, /*heat_ms=*/0));
  EXPECT_EQ(t.winner.final_rounds, "burst") << "a heat budget of 0 turns sustained timing off";
}

TEST(TunerSustained, MedianClockOfTheReadingsThatKnowIt) {
  DeviceClock m = median_clock({{1980, 500, false}, {}, {1755, 700, true}, {1760, 690, true}});
  EXPECT_DOUBLE_EQ(m.sm_mhz, 1760);
  EXPECT_DOUBLE_EQ(m.power_w, 690);
  EXPECT_FALSE(m.limited) << "2 of 4 readings limited is not most";
  EXPECT_FALSE(median_clock({}).known());
}

}  // namespace
}  // namespace tunableop
