// The tuning protocol's phases over one problem (docs/design.md, "Tuning protocol"): what
// Tuner::find_fastest (tunableop/tuner.h) composes. Core's own: tests drive the phases one by
// one on a fake clock (tests/core/tuner_*_test.cc).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tunableop/config.h"
#include "tunableop/log.h"
#include "tunableop/results.h"
#include "tunableop/status.h"
#include "tunableop/timer.h"
#include "tunableop/tuner.h"

namespace tunableop {

// One candidate's progress through the phases.
struct CandidateState {
  size_t index = 0;
  std::string name;
  int batch = 1;                // runs per timed sample (short runs are batched)
  double probe_ms = 0;          // the sizing run (cold: never faster than a warm run)
  std::vector<double> samples;  // ms per run: screening samples, then halving samples
  Measurement m;                // summarize(samples); after remeasure(): its rounds
  double estimate_ms = 0;       // what screening and halving rank by: TuningSession::estimate()
  std::vector<double> rounds;   // remeasure(): this candidate's value (median ms) in each round
  bool timed = false;           // screened, and still in the race
  bool verified = false;        // passed the numerics check (or the policy has it off)
};

// Why a candidate left the race (nothing: it is still in).
struct Dropped {
  CandidateReport::Outcome outcome;
  Status status;    // what the candidate or the check said (ok for kSkippedSlow)
  Measurement m{};  // kSkippedSlow: the screening estimate
};

// How a finalist compares with Default in the interleaved re-measurement: per round the ratio
// of its value to Default's in the same round (both met the same machine state), the median of
// those ratios and their spread (the noise the decision must beat).
struct VersusDefault {
  int rounds = 0;     // paired rounds (0: nothing to compare)
  double ratio = 1;   // median over rounds of finalist / Default (below 1: faster)
  double spread = 0;  // the range of the ratios, the most extreme round at each end left out
                      // from five rounds on (one disturbed round does not decide alone)
  double margin = 0;  // what the ratio must beat: 1 - max(min_improvement, spread)
  bool wins = false;  // ratio < 1 - margin... i.e. faster than Default by more than the noise
};
VersusDefault versus_default(const std::vector<double>& candidate_rounds, const std::vector<double>& default_rounds,
                             double min_improvement);

// The median SM clock and power of the readings that know them; limited when most readings are.
DeviceClock median_clock(const std::vector<DeviceClock>& readings);

class TuningSession {
 public:
  // Samples per candidate per round (halving, re-measurement) at most: enough for medians that
  // shrug off disturbed runs, few enough that per-sample clock overhead (a device
  // synchronisation on GPUs) stays small.
  static constexpr int kMaxSamplesPerRound = 10;
  // Screening's cut on the cold sizing run alone (no screening sample): a candidate whose first
  // run took more than kColdCutRatio times the best so far plus kColdAllowanceMs (what a first
  // call may cost once: thread start-up, JIT, lazy module loading, page faults; or a time
  // slice lost to another process on a busy machine) cannot come within screen_ratio_1 of it
  // warm. It saves the second run of the slowest candidates (BLIS on a 2-core VM with a busy
  // core: 0.5 s a run).
  static constexpr double kColdCutRatio = 3.0;
  static constexpr double kColdAllowanceMs = 10.0;
  // A winner this much faster than Default (ratio below 1/kRecheckFactor) whose final time or
  // Default's is this far from its screening estimate was measured while the machine changed
  // (a burst of load that slows a two-thread candidate, not a one-thread one): the pair is
  // measured again and the win must hold there too.
  static constexpr double kRecheckFactor = 1.25;
  // Rounds of the final re-measurement at least (remeasure()).
  static constexpr int kMinRemeasureRounds = 5;
  static constexpr double kRecheckDrift = 0.25;
  // Heat (sustained timing) ends early once the device reports a limit and its clock reads at
  // least this fraction of the previous round's reading (no longer falling); and is skipped when
  // sustained rounds ended less than kStillHotMs ago (the device has not cooled).
  static constexpr double kSettledClock = 0.99;
  static constexpr double kStillHotMs = 5.0;
  TuningSession(TuningProblem& problem, const TuningPolicy& policy, Logger& log);

  TuningProblem& problem() { return pr_; }
  const std::string& what() const { return what_; }  // "Op(params)" for log lines
  double elapsed_ms();                               // since the session began
  // ms per run of `runs` consecutive executions of candidate i, each on the next input copy.
  StatusOr<double> time_runs(size_t i, int runs);
  // How to spend `share_ms` on candidate s (at most max_runs runs): as many samples as fit, up
  // to max_samples, each of as few runs as the timer resolves (s.batch), so that medians see
  // single disturbed runs rather than averages they spoiled. samples == 0: nothing fits (and
  // `at_least_one` was false).
  struct SamplePlan {
    int samples = 0;
    int runs_per_sample = 0;
  };
  // A candidate's ms per run from its samples, robust when there are few: the lower median (a
  // single disturbed run among two cannot raise it) and, while there is one sample of one run,
  // the smaller of it and the sizing run (cold, so never faster than the candidate really is).
  static double estimate(const CandidateState& s);
  static SamplePlan plan_samples(const CandidateState& s, double share_ms, int64_t max_runs, int max_samples,
                                 bool at_least_one);
  // Takes the planned samples of s back to back, appending each (ms per run) to *out when given.
  Status take_samples(const CandidateState& s, SamplePlan plan, std::vector<double>* out);

  // Phase 1, probe: asks whether candidate i supports the problem and sizes its samples from
  // one run (runs shorter than the timer's resolution are batched).
  std::optional<Dropped> probe(size_t i, CandidateState& s);
  // Phase 2, screen: a few samples, dropped when slower than the policy's ratios times best_ms
  // (the fastest verified candidate so far; Default, index 0, is never screened out). By
  // default only the first cut (screen_runs_1 samples, screen_ratio_1) happens here; the second
  // ratio is applied by the halving rounds, which sample every contestant anyway.
  std::optional<Dropped> screen(CandidateState& s, double best_ms);
  // Phase 3, verify: the numerics check against the reference (when the policy asks for it).
  // Sets s.verified. Only candidates that matter pay for it (it costs a run, and on a GPU a
  // read of the whole output): Default, a candidate about to become the best so far, and a
  // contestant about to survive a halving round.
  std::optional<Dropped> verify(CandidateState& s);
  // Phases 1-2 for candidate i, and phase 3 when it is Default or beats best_ms (so that the
  // best so far, which prunes the others, is always verified); on success s is in the race
  // (timed, m = its screening estimate). What find_fastest does for each candidate.
  std::optional<Dropped> qualify(size_t i, double best_ms, CandidateState& s);
  // Phase 4, halve (successive halving): the contestants (screened; not Default) share the
  // tuning budget round by round. First a shared warm-up (max_warmup_ms in all, at most
  // max_warmup_iters runs each); then each round gives max_tuning_ms to its contestants (equal
  // shares, at most max_tuning_iters runs and at least one sample each), taken interleaved, and
  // keeps the faster half by the median of all of a contestant's samples (and none slower than
  // screen_ratio_2 times the fastest), until at most `keep` remain. The numerics check is
  // paid where a place is final: the last cut to `keep` (and a cut forced by the problem
  // budget) takes only candidates that pass it, one failing leaves without taking a place and
  // the next moves up, so a wrong-but-fast candidate never becomes a finalist. (Checking every
  // round's survivors cost a run and a comparison each: a tenth of a large GEMM's tuning.)
  // Total cost ~ log2(contestants) rounds instead of a full budget per candidate. Returns the
  // survivors (verified), fastest first; the eliminated are reported (kHalved). When the
  // problem budget runs out, stops and keeps the `keep` fastest so far.
  std::vector<CandidateState*> halve(std::vector<CandidateState*> contestants, size_t keep);
  // Phase 5, re-measure: the given candidates (Default first) interleaved, round-robin with the
  // first mover rotating, several rounds (policy); each round's value per candidate (the median
  // of its samples in that round) goes to s.rounds, and the median of all its samples replaces
  // its first-pass measurement. A candidate failing here is dropped (timed = false); Default
  // (finalists[0]) failing ends the phase with its error.
  //
  // Sustained timing (docs/design.md): when sustained(Default) says so, the rounds count only
  // after heat() held the device under the finalists' load, and every round reads the device's
  // clock; final_rounds() says how the last re-measurement went.
  Status remeasure(const std::vector<CandidateState*>& finalists);
  // Whether a problem's final rounds run under sustained load: its timer's device slows down
  // under load (a GPU's power cap; not the host clock) and Default's call takes at least the
  // policy's sustained_min_call_ms (a workload of such calls keeps the device at its cap).
  bool sustained(const CandidateState& def);
  // How the last re-measurement's rounds ran: "sustained" or "burst", and the medians of the
  // device's clock readings taken after each finalist's samples (zeros when unknown).
  struct FinalRounds {
    std::string how;
    DeviceClock clock;
    double heated_ms = 0;  // the load before the rounds counted (sustained)
  };
  const FinalRounds& final_rounds() const { return final_rounds_; }
  // Phase 6, decide: the timed finalist with the lowest ratio to Default over the paired rounds
  // among those that beat Default by more than the noise (versus_default); Default when none
  // does. Without paired rounds (re-measurement off), the fastest median unless it misses
  // Default's by the policy's margin. A big win that disagrees with screening is re-checked
  // (kRecheckFactor): the pair is re-measured and the win must hold in both.
  const CandidateState& decide(const std::vector<CandidateState*>& finalists);

  // Reports and logs a candidate leaving the race (the one place failures are handled), and
  // lets the device recover after a failed run or check.
  void drop(size_t i, const Dropped& d);
  // Records a candidate that was never tried because the problem's budget ran out.
  void skip_over_budget(size_t i);
  bool over_budget() { return elapsed_ms() > pol_.max_problem_ms; }
  // What is left of the problem's budget (max_problem_ms), never negative. Every phase spends
  // at most this: screening skips its sample, halving rounds shrink and then cut on estimates,
  // the re-measurement takes fewer rounds or none (then the first-pass medians decide), and a
  // re-check that does not fit keeps Default. Only Default's qualification (a sizing run and
  // its check) and a sample already started can go past it.
  double remaining_ms() { return std::max(0.0, pol_.max_problem_ms - elapsed_ms()); }
  void note(size_t i, CandidateReport::Outcome o, std::string detail, Measurement m = {});
  TuningReport& report() { return report_; }

 private:
  TuningProblem& pr_;
  const TuningPolicy& pol_;
  Logger& log_;
  std::string what_;
  double t_begin_ = 0;
  size_t rotation_ = 0;
  TuningReport report_;
  // One halving round: samples for every contestant, interleaved; failures dropped.
  void halving_round(std::vector<CandidateState*>& field, double budget_ms, int64_t max_runs, bool record);
  // Up to `places` of the sorted field, none slower than `ratio` times the first; the others
  // leave (kHalved with `why`). With `check`, only candidates that pass (or passed) the numerics
  // check take a place (a failed one leaves as kNumericsFailed and the next moves up).
  void keep_fastest(std::vector<CandidateState*>& field, size_t places, double ratio, const std::string& why,
                    bool check);
  // decide() on the re-measured rounds; nullptr: Default stays.
  CandidateState* winner_over_default(const std::vector<CandidateState*>& finalists);
  // The heat before sustained rounds count (tuner_sustained.cc): rounds of `sample(q)` over the
  // finalists (their values thrown away) for at most sustained_heat_ms, ended earlier once the
  // device reports a power or thermal limit and its clock stopped falling. Returns the ms spent.
  double heat(size_t finalists, double default_ms, const std::function<bool(size_t)>& sample);
  FinalRounds final_rounds_;
  double hot_until_ms_ = -std::numeric_limits<double>::infinity();  // when sustained rounds last ended
};

}  // namespace tunableop
