// The tuning protocol (docs/design.md), generic over ops: an op describes one problem through
// TuningProblem, the tuner decides which candidate wins. The protocol is a sequence of phases
// (TuningSession) that Tuner::find_fastest composes and that benchmarks and the engine reuse,
// so every number this project prints is measured the same way.
#pragma once

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

namespace tunableop {

// One problem as the tuner sees it. Index 0 must be Default.
class TuningProblem {
 public:
  virtual ~TuningProblem() = default;
  virtual std::string op_signature() const = 0;
  virtual std::string params_signature() const = 0;
  virtual size_t candidate_count() const = 0;
  virtual std::string candidate_name(size_t i) const = 0;
  virtual Status supports(size_t i) = 0;
  // Runs candidate i once on pristine inputs and compares with the reference; a failure
  // (kNumericsMismatch, or any error) means the candidate can never win.
  virtual Status check_numerics(size_t i) = 0;
  // One run of candidate i on input copy `rotation % rotation_count()`; queued work is fine,
  // the timer waits for it.
  virtual Status run(size_t i, size_t rotation) = 0;
  virtual size_t rotation_count() const = 0;
  virtual Timer& timer() = 0;
  // After a candidate failed: give the device a chance to recover (see DeviceRuntime::recover).
  virtual Status recover() { return Status::ok(); }
};

struct CandidateReport {
  std::string name;
  enum class Outcome { kUnsupported, kNumericsFailed, kFailed, kSkippedSlow, kOverBudget, kTimed } outcome;
  std::string detail;
  Measurement m;  // for kTimed (and the screening estimate for kSkippedSlow)
};

struct TuningReport {
  ResultEntry winner;
  std::vector<CandidateReport> candidates;
  double default_median_ms = 0;
};

// --- Statistics: the one place medians are taken (tuner, `tunableop bench`, the engine).

// Median, mean, std, min over samples (ms).
Measurement summarize(std::vector<double> samples_ms);
// The median alone (0 for no samples): summarize(samples).median_ms.
double median(std::vector<double> samples);

// Interleaved measurement: in round r the items run in an order rotated by r, so that each item
// meets the same machine state on average (a ratio measured this way beats two absolute times).
// measure(i) returns one sample; an item that fails is dropped for the remaining rounds and
// on_fail(i, status) is told once. Runs at most max_rounds; after min_rounds, stops once
// budget_ms of `clock` have passed. Returns the samples of each item.
struct InterleavedRounds {
  int min_rounds = 3;
  int max_rounds = 7;
  double budget_ms = std::numeric_limits<double>::infinity();
};
std::vector<std::vector<double>> interleaved_rounds(size_t items, const InterleavedRounds& rounds, Timer& clock,
                                                    const std::function<StatusOr<double>(size_t)>& measure,
                                                    const std::function<void(size_t, const Status&)>& on_fail);

// --- The protocol's phases over one problem.

// One candidate's progress through the phases.
struct CandidateState {
  size_t index = 0;
  std::string name;
  int batch = 1;                // runs per timed sample (short runs are batched)
  std::vector<double> samples;  // ms per run: screening samples, then timing samples
  Measurement m;                // after time(): the timing samples; after remeasure(): its rounds
  bool timed = false;           // survived every phase so far
};

// Why a candidate left the race (nothing: it is still in).
struct Dropped {
  CandidateReport::Outcome outcome;
  Status status;    // what the candidate or the check said (ok for kSkippedSlow)
  Measurement m{};  // kSkippedSlow: the screening estimate
};

class TuningSession {
 public:
  TuningSession(TuningProblem& problem, const TuningPolicy& policy, Logger& log);

  TuningProblem& problem() { return pr_; }
  const std::string& what() const { return what_; }  // "Op(params)" for log lines
  double elapsed_ms();                               // since the session began
  // ms per run of `runs` consecutive executions of candidate i, each on the next input copy.
  StatusOr<double> time_runs(size_t i, int runs);

  // Phase 1, probe: asks whether candidate i supports the problem and sizes its samples from
  // one run (runs shorter than the timer's resolution are batched).
  std::optional<Dropped> probe(size_t i, CandidateState& s);
  // Phase 2, screen: a few samples, dropped when slower than the policy's ratios times best_ms
  // (the fastest verified candidate so far; Default, index 0, is never screened out).
  std::optional<Dropped> screen(CandidateState& s, double best_ms);
  // Phase 3, verify: the numerics check against the reference (when the policy asks for it).
  // After screening, so only survivors pay for it.
  std::optional<Dropped> verify(CandidateState& s);
  // Phase 4, time: warm-up and timing under the policy's budgets (the smaller of ms and
  // iterations; at least one run each). Fills s.m and sets s.timed.
  std::optional<Dropped> time(CandidateState& s);
  // Phases 1-4 in order for candidate i (what find_fastest does for each candidate).
  std::optional<Dropped> evaluate(size_t i, double best_ms, CandidateState& s);
  // Phase 5, re-measure: the given candidates interleaved, several rounds (policy), medians
  // replace their first-pass measurements. A candidate failing here is dropped (timed = false);
  // Default (finalists[0]) failing ends the phase with its error.
  Status remeasure(const std::vector<CandidateState*>& finalists);
  // Phase 6, decide: the fastest timed finalist, unless it does not beat Default (finalists[0])
  // by the policy's margin.
  const CandidateState& decide(const std::vector<CandidateState*>& finalists);

  // Reports and logs a candidate leaving the race (the one place failures are handled), and
  // lets the device recover after a failed run or check.
  void drop(size_t i, const Dropped& d);
  // Records a candidate that was never tried because the problem's budget ran out.
  void skip_over_budget(size_t i);
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
};

class Tuner {
 public:
  Tuner(const TuningPolicy& policy, Logger& log) : policy_(policy), log_(log) {}
  // Fails only when not even Default can run (then the Status says why).
  StatusOr<TuningReport> find_fastest(TuningProblem& problem);

 private:
  TuningPolicy policy_;
  Logger& log_;
};

}  // namespace tunableop
