// The decision (phases 5 and 6) on scripted fake timings: Default is always a finalist, the
// finalists' last measurement is interleaved with it, and a candidate replaces Default only when
// its paired rounds beat Default by more than their own spread (and the margin). Ties, a
// candidate fast only while screened, noise that hits one candidate and not the other, and a
// burst of load during the re-measurement must all leave Default in place; a clear win must not.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/fake_problem.h"
#include "core/tuning_session.h"

namespace tunableop {
namespace {

using testing::FakeCandidate;
using testing::FakeProblem;

struct Tuned {
  std::string winner;
  double time_ms = 0;
  double default_ms = 0;
  std::vector<std::string> log;
  bool logged(const std::string& what) const {
    for (const auto& l : log)
      if (l.find(what) != std::string::npos) return true;
    return false;
  }
};

// One run per finalist per re-measurement round, seven rounds: each round's value is one run,
// so a scripted run pattern is a scripted round pattern.
TuningPolicy one_run_rounds() {
  TuningPolicy pol;
  pol.remeasure_rounds = 7;
  pol.remeasure_ms = 1e9;
  pol.max_tuning_ms = 7;  // a 1 ms share per round
  return pol;
}

Tuned tune(std::vector<FakeCandidate> cands, uint64_t seed = 7, TuningPolicy pol = {}) {
  FakeProblem pr(std::move(cands), 0.05, seed);
  Logger log;
  log.set_level(3);
  Tuned t;
  log.set_sink([&](const std::string& l) { t.log.push_back(l); });
  Tuner tuner(pol, log);
  auto r = tuner.find_fastest(pr);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  if (!r.is_ok()) return t;
  t.winner = r->winner.solution;
  t.time_ms = r->winner.time_ms;
  t.default_ms = r->winner.default_ms;
  return t;
}

// --- versus_default: the rule itself.

TEST(VersusDefault, MedianRatioOfPairedRounds) {
  auto v = versus_default({0.9, 0.8, 1.0}, {1.0, 1.0, 1.0}, 0.02);
  EXPECT_EQ(v.rounds, 3);
  EXPECT_DOUBLE_EQ(v.ratio, 0.9);
  EXPECT_NEAR(v.spread, 0.2, 1e-12);  // 1.0 - 0.8: with three rounds nothing is left out
  EXPECT_NEAR(v.margin, 0.2, 1e-12);
  EXPECT_FALSE(v.wins) << "10% faster by the median, but the rounds disagree by as much";
}

TEST(VersusDefault, PairsRoundByRoundSoCommonDriftCancels) {
  // Both slow down together round after round: the ratio is the same in every round.
  auto v = versus_default({0.9, 1.8, 2.7, 3.6, 4.5}, {1, 2, 3, 4, 5}, 0.02);
  EXPECT_NEAR(v.ratio, 0.9, 1e-12);
  EXPECT_NEAR(v.spread, 0, 1e-12);
  EXPECT_TRUE(v.wins);
}

TEST(VersusDefault, OneDisturbedRoundAtEachEndIsLeftOutFromFiveRounds) {
  auto v = versus_default({0.9, 0.9, 0.9, 0.2, 3.0}, {1, 1, 1, 1, 1}, 0.02);
  EXPECT_DOUBLE_EQ(v.ratio, 0.9);
  EXPECT_NEAR(v.spread, 0, 1e-12);
  EXPECT_TRUE(v.wins);
  // Two disturbed rounds of five: noise that returns, and the win does not count.
  v = versus_default({0.9, 0.9, 0.9, 2.5, 3.0}, {1, 1, 1, 1, 1}, 0.02);
  EXPECT_NEAR(v.spread, 1.6, 1e-12);
  EXPECT_FALSE(v.wins);
  // Below five rounds nothing is left out.
  v = versus_default({0.9, 0.9, 0.9, 0.95}, {1, 1, 1, 1}, 0.02);
  EXPECT_NEAR(v.spread, 0.05, 1e-12);
  EXPECT_TRUE(v.wins) << "0.9 < 1 - 0.05";
  v = versus_default({0.9, 0.9, 0.9, 1.0}, {1, 1, 1, 1}, 0.02);
  EXPECT_FALSE(v.wins);
}

TEST(VersusDefault, TheMarginHoldsWhenTheRoundsAgree) {
  EXPECT_TRUE(versus_default({0.9, 0.91, 0.92}, {1, 1, 1}, 0.02).wins);
  EXPECT_FALSE(versus_default({0.99, 0.99, 0.99}, {1, 1, 1}, 0.02).wins);
  EXPECT_TRUE(versus_default({0.97, 0.97, 0.97}, {1, 1, 1}, 0.02).wins);
  EXPECT_FALSE(versus_default({}, {}, 0.0).wins) << "no rounds, no evidence";
  EXPECT_FALSE(versus_default({0.5, 0.5}, {0, 0}, 0.0).wins) << "Default's rounds unusable";
}

// --- The whole tuner on scripted timings.

TEST(Decide, DefaultIsAFinalistAndCarriesItsOwnTime) {
  auto t = tune({{"Default", 1.0}, {"A", 0.8}, {"B", 0.85}, {"C", 0.9}});
  EXPECT_EQ(t.winner, "A");
  EXPECT_TRUE(t.logged("├──re-measured Default")) << "Default is re-measured with the finalists";
  EXPECT_NEAR(t.default_ms, 1.0, 1e-9) << "the winner's entry says what Default measured";
  EXPECT_NEAR(t.time_ms, 0.8, 1e-9);
}

TEST(Decide, TiesWithDefaultKeepDefault) {
  // Rivals within half a percent of Default, 3% noise per run: whatever the luck of the
  // screening and the halving, Default stays.
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    std::vector<FakeCandidate> c = {{"Default", 1.0}, {"A", 0.995}, {"B", 1.0}, {"C", 1.005}, {"D", 0.998}};
    for (auto& x : c) x.noise = 0.03;
    auto t = tune(c, seed);
    EXPECT_EQ(t.winner, "Default") << "seed " << seed;
  }
}

TEST(Decide, ACandidateFastOnlyWhileScreenedDoesNotWin) {
  // Half the time of Default for its first runs (screening, halving), then 2% slower: the final
  // interleaved rounds see it as it is.
  for (int fast_runs : {2, 5, 20}) {
    FakeCandidate lucky{"Lucky", 1.02};
    lucky.run_factor = [fast_runs](int n) { return n <= fast_runs ? 0.5 : 1.0; };
    auto t = tune({{"Default", 1.0}, lucky, {"Other", 1.3}});
    EXPECT_EQ(t.winner, "Default") << "fast for " << fast_runs << " runs";
  }
}

TEST(Decide, NoisyCandidateThatIsSlowerAlmostNeverWins) {
  // 3% slower than Default on average, with 20% noise per run (Default 1%): the median of its
  // samples sometimes makes it look a few percent faster. Decided on the paired medians with the 2%
  // margin alone (the rule before the spread), it won in 8 of 40 seeds; with the spread, in one
  // (seed 9, whose draws put six of seven rounds below 0.97: the rule is statistical, not a
  // proof).
  int wins = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    FakeCandidate def{"Default", 1.0};
    def.noise = 0.01;
    FakeCandidate noisy{"Noisy", 1.03};
    noisy.noise = 0.20;
    wins += tune({def, noisy}, seed).winner == "Noisy";
  }
  EXPECT_LE(wins, 1);
}

TEST(Decide, NoiseThatHitsOnlyTheCandidateKeepsDefault) {
  // A two-thread candidate while another process holds a core every third round: 10% faster
  // when left alone, 2.5 times slower when not (1.35x Default on average). The median of its
  // samples says 0.9; the paired rounds disagree with each other, so Default stays.
  FakeCandidate two_threads{"Two", 0.9};
  two_threads.run_factor = [](int n) { return n % 3 == 0 ? 2.5 : 1.0; };
  auto t = tune({{"Default", 1.0}, two_threads}, 7, one_run_rounds());
  EXPECT_EQ(t.winner, "Default");
  EXPECT_TRUE(t.logged("├──keeping Default over Two"));
}

TEST(Decide, NoiseThatHitsOnlyDefaultKeepsDefaultToo) {
  // The mirror case (the cpu-llm suite's llama2-7b.qkv/4@8): Default uses both cores and loses
  // every other round to a busy core; a one-thread candidate is 1.5x Default when the machine is
  // quiet and wins every disturbed round. Its wins are not consistent: Default stays.
  FakeCandidate def{"Default", 1.0};
  def.run_factor = [](int n) { return n > 2 && n % 2 == 0 ? 3.0 : 1.0; };
  auto t = tune({def, {"OneThread", 1.5}}, 7, one_run_rounds());
  EXPECT_EQ(t.winner, "Default");
}

TEST(Decide, ABurstOfLoadDuringTheFinalRoundsIsRechecked) {
  // Default (two threads) is three times slower for exactly the first re-measurement (a burst
  // of load), the one-thread candidate is not: it wins that measurement 2x in every round,
  // far from both screening times. The re-check measures the pair again, after the burst.
  TuningPolicy pol = one_run_rounds();
  const int screening_runs = 1 + pol.screen_runs_1 + pol.screen_runs_2;
  FakeCandidate def{"Default", 1.0};
  def.run_factor = [&](int n) { return n > screening_runs && n <= screening_runs + 7 ? 3.0 : 1.0; };
  auto t = tune({def, {"OneThread", 1.5}}, 7, pol);
  EXPECT_TRUE(t.logged("├──re-checking OneThread")) << "the big win is checked again";
  EXPECT_EQ(t.winner, "Default");
  EXPECT_TRUE(t.logged("├──keeping Default: OneThread does not beat it again"));
}

TEST(Decide, ABigWinThatHoldsSurvivesTheRecheck) {
  // 2x faster than Default in screening and after: no re-check (nothing drifted)...
  auto t = tune({{"Default", 1.0}, {"Fast", 0.5}});
  EXPECT_EQ(t.winner, "Fast");
  EXPECT_FALSE(t.logged("├──re-checking"));
  // ...and a candidate that got faster after screening (a cold cache in screening) is
  // re-checked and keeps its win.
  FakeCandidate warming{"Warming", 0.5};
  warming.run_factor = [](int n) { return n <= 2 ? 2.0 : 1.0; };
  t = tune({{"Default", 1.0}, warming});
  EXPECT_TRUE(t.logged("├──re-checking Warming"));
  EXPECT_TRUE(t.logged("├──Warming beats Default again"));
  EXPECT_EQ(t.winner, "Warming");
}

TEST(Decide, AClearWinUnderNoiseIsTaken) {
  // 6% faster with 2% noise per run on both: the rounds agree, the win counts every time.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::vector<FakeCandidate> c = {{"Default", 1.0}, {"Win", 0.94}, {"Tie", 1.0}};
    for (auto& x : c) x.noise = 0.02;
    EXPECT_EQ(tune(c, seed).winner, "Win") << "seed " << seed;
  }
}

TEST(Screening, ASlowFirstRunLeavesWithoutASecond) {
  // Default 1 ms; "Pathological" takes 50 ms a run: one run tells (3x + 10 ms cold allowance).
  // "ColdStart" takes 12 ms on its first run (under the cut) and 0.9 ms warm: kept, and wins.
  FakeCandidate slow{"Pathological", 50.0};
  FakeCandidate cold{"ColdStart", 0.9};
  cold.run_factor = [](int n) { return n == 1 ? 12.0 / 0.9 : 1.0; };
  FakeProblem pr({{"Default", 1.0}, slow, cold});
  Logger log;
  Tuner tuner(TuningPolicy{}, log);
  auto r = tuner.find_fastest(pr);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(pr.runs(1), 1) << "the sizing run only";
  EXPECT_EQ(r->winner.solution, "ColdStart");
}

}  // namespace
}  // namespace tunableop
