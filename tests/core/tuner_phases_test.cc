// Each phase of the tuning protocol on its own (TuningSession), and the shared statistics and
// interleaved-rounds helpers that `tunableop bench` and the engine's measurements call.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/fake_problem.h"
#include "core/tuning_session.h"

namespace tunableop {
namespace {

using testing::counting_policy;
using testing::FakeCandidate;
using testing::FakeProblem;
using Outcome = CandidateReport::Outcome;

struct Phases {
  explicit Phases(std::vector<FakeCandidate> c, TuningPolicy p = counting_policy(), double min_sample_ms = 0.05)
      : pr(std::move(c), min_sample_ms), pol(p), session(pr, pol, log) {
    log.set_level(3);
    log.set_sink([this](const std::string& l) { lines.push_back(l); });
  }
  bool logged(const std::string& what) const {
    for (const auto& l : lines)
      if (l.find(what) != std::string::npos) return true;
    return false;
  }
  FakeProblem pr;
  TuningPolicy pol;
  Logger log;
  std::vector<std::string> lines;
  TuningSession session;
};

TEST(Median, OddEvenAndEmpty) {
  EXPECT_DOUBLE_EQ(median({}), 0);
  EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 10}), 3);
}

TEST(InterleavedRounds, EveryItemGoesFirstInTurn) {
  testing::FakeClock clock;
  testing::FakeTimer timer(clock, 0.05);
  std::vector<size_t> seq;
  auto samples = interleaved_rounds(
      3, InterleavedRounds{3, 3}, timer,
      [&](size_t i) -> StatusOr<double> {
        seq.push_back(i);
        return double(i);
      },
      nullptr);
  EXPECT_EQ(seq, (std::vector<size_t>{0, 1, 2, 1, 2, 0, 2, 0, 1}));
  ASSERT_EQ(samples.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(samples[i], std::vector<double>(3, double(i)));
}

TEST(InterleavedRounds, AFailedItemIsToldOnceAndNeverRunAgain) {
  testing::FakeClock clock;
  testing::FakeTimer timer(clock, 0.05);
  std::vector<int> runs(3, 0);
  std::vector<size_t> failed;
  auto samples = interleaved_rounds(
      3, InterleavedRounds{5, 5}, timer,
      [&](size_t i) -> StatusOr<double> {
        if (++runs[i] == 2 && i == 1) return Status::internal("lost");
        return 1.0;
      },
      [&](size_t i, const Status& st) {
        failed.push_back(i);
        EXPECT_EQ(st.message(), "lost");
      });
  EXPECT_EQ(failed, std::vector<size_t>{1});
  EXPECT_EQ(runs[1], 2);
  EXPECT_EQ(samples[1].size(), 1u);
  EXPECT_EQ(samples[0].size(), 5u);
  EXPECT_EQ(samples[2].size(), 5u);
}

TEST(InterleavedRounds, BudgetStopsAfterTheMinimumRounds) {
  testing::FakeClock clock;
  testing::FakeTimer timer(clock, 0.05);
  auto samples = interleaved_rounds(
      2, InterleavedRounds{3, 100, 10.0}, timer,
      [&](size_t) -> StatusOr<double> {
        clock.now += 1.0;
        return 1.0;
      },
      nullptr);
  // 2 ms per round: the budget of 10 ms is passed after round 5; never fewer than 3 rounds.
  EXPECT_EQ(samples[0].size(), 6u);
  auto tiny = interleaved_rounds(
      2, InterleavedRounds{3, 100, 0.0}, timer,
      [&](size_t) -> StatusOr<double> {
        clock.now += 1.0;
        return 1.0;
      },
      nullptr);
  EXPECT_EQ(tiny[0].size(), 3u);
}

TEST(TuningPhases, ProbeReportsUnsupportedAndSizesBatches) {
  Phases ph({{"Default", 1.0}, {"NotHere", 1.0, Status::unsupported("needs avx512")}, {"Tiny", 0.01}});
  CandidateState s;
  EXPECT_FALSE(ph.session.probe(0, s).has_value());
  EXPECT_EQ(s.batch, 1);  // 1 ms > the 0.05 ms sample floor
  auto d = ph.session.probe(1, s);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->outcome, Outcome::kUnsupported);
  EXPECT_EQ(ph.pr.runs(1), 0) << "an unsupported candidate is never run";
  EXPECT_FALSE(ph.session.probe(2, s).has_value());
  EXPECT_EQ(s.batch, 5) << "0.01 ms runs are batched up to the timer's 0.05 ms";
  EXPECT_EQ(ph.pr.runs(2), 1);
}

TEST(TuningPhases, ScreenCutsAgainstTheBestSoFarButNeverDefault) {
  Phases ph({{"Default", 10.0}, {"TwiceAsSlow", 2.0}, {"Close", 1.1}});
  CandidateState def, slow, close;
  ASSERT_FALSE(ph.session.probe(0, def).has_value());
  EXPECT_FALSE(ph.session.screen(def, /*best_ms=*/1.0).has_value()) << "Default is never screened out";
  ASSERT_FALSE(ph.session.probe(1, slow).has_value());
  auto d = ph.session.screen(slow, 1.0);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->outcome, Outcome::kSkippedSlow);
  EXPECT_DOUBLE_EQ(d->m.median_ms, 2.0);
  EXPECT_EQ(ph.pr.runs(1), 1 + ph.pol.screen_runs_1) << "cut at the first threshold";
  ASSERT_FALSE(ph.session.probe(2, close).has_value());
  EXPECT_FALSE(ph.session.screen(close, 1.0).has_value()) << "1.1 ms is within 1.15x of 1 ms";
  EXPECT_EQ(close.samples.size(), size_t(ph.pol.screen_runs_1 + ph.pol.screen_runs_2));
}

TEST(TuningPhases, VerifyRunsTheCheckOnlyWhenThePolicyAsks) {
  Phases on({{"Default", 1.0}, {"Wrong", 0.5, Status::ok(), /*numerics=*/false}});
  CandidateState s;
  ASSERT_FALSE(on.session.probe(1, s).has_value());
  auto d = on.session.verify(s);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->outcome, Outcome::kNumericsFailed);
  EXPECT_EQ(on.pr.checks(1), 1);

  TuningPolicy off = counting_policy();
  off.numerical_check = false;
  Phases unchecked({{"Default", 1.0}, {"Wrong", 0.5, Status::ok(), false}}, off);
  ASSERT_FALSE(unchecked.session.probe(1, s).has_value());
  EXPECT_FALSE(unchecked.session.verify(s).has_value());
  EXPECT_EQ(unchecked.pr.checks(1), 0);
}

TEST(TuningPhases, QualifyLeavesTheScreeningEstimate) {
  Phases ph({{"Default", 1.0}, {"A", 0.5}});
  CandidateState s;
  ASSERT_FALSE(ph.session.qualify(1, 1.0, s).has_value());
  EXPECT_TRUE(s.timed);
  EXPECT_EQ(s.m.runs, ph.pol.screen_runs_1 + ph.pol.screen_runs_2);
  EXPECT_DOUBLE_EQ(s.m.median_ms, 0.5);
  EXPECT_EQ(ph.pr.checks(1), 1);
}

TEST(TuningPhases, RemeasureReplacesFirstPassWithInterleavedMedians) {
  TuningPolicy pol = counting_policy();
  pol.remeasure_rounds = 5;
  pol.remeasure_ms = 1e9;
  Phases ph({{"Default", 2.0}, {"Lucky", 1.0}}, pol);
  std::vector<CandidateState> st(2);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_FALSE(ph.session.qualify(i, 1e9, st[i]).has_value());
  }
  st[1].m.median_ms = 0.1;  // pretend the first pass was lucky
  ASSERT_TRUE(ph.session.remeasure({&st[0], &st[1]}).is_ok());
  EXPECT_DOUBLE_EQ(st[1].m.median_ms, 1.0);
  EXPECT_EQ(st[1].m.runs, 10) << "5 rounds of 2 one-run samples (10 iterations over 5 rounds)";
  EXPECT_TRUE(ph.logged("├──re-measured Lucky"));
}

TEST(TuningPhases, RemeasureEndsWithDefaultsError) {
  TuningPolicy pol = counting_policy();
  pol.remeasure_rounds = 3;
  FakeCandidate def{"Default", 1.0};
  def.fail_on_run = 1 + 3 + 1;  // first run after it qualified
  Phases ph({def, {"A", 0.5}}, pol);
  std::vector<CandidateState> st(2);
  for (size_t i = 0; i < 2; ++i) ASSERT_FALSE(ph.session.qualify(i, 1e9, st[i]).has_value());
  Status s = ph.session.remeasure({&st[0], &st[1]});
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("planted failure"), std::string::npos);
}

TEST(TuningPhases, DecideKeepsDefaultWithinTheMargin) {
  Phases ph({{"Default", 1.0}});
  CandidateState def, a, b;
  def.name = "Default";
  def.timed = a.timed = b.timed = true;
  def.m.median_ms = 1.0;
  a.name = "A";
  a.m.median_ms = 0.99;  // 1% faster: under the 2% margin
  b.name = "B";
  b.m.median_ms = 1.5;
  EXPECT_EQ(ph.session.decide({&def, &a, &b}).name, "Default");
  a.m.median_ms = 0.9;
  EXPECT_EQ(ph.session.decide({&def, &a, &b}).name, "A");
  a.timed = false;  // dropped while re-measuring: cannot win
  EXPECT_EQ(ph.session.decide({&def, &a, &b}).name, "Default");
}

}  // namespace
}  // namespace tunableop
