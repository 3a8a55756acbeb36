// The tuning protocol (docs/design.md), generic over ops: an op describes one problem through
// TuningProblem, the tuner decides which candidate wins. Benchmarks and the engine measure with
// the same pieces (time_runs, interleaved_rounds, summarize, median), so every number this
// project prints is measured the same way.
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
  // kHalved: verified, then eliminated by successive halving (detail names the round).
  enum class Outcome { kUnsupported, kNumericsFailed, kFailed, kSkippedSlow, kOverBudget, kHalved, kTimed } outcome;
  std::string detail;
  Measurement m;  // kTimed: the final measurement; kSkippedSlow, kHalved: the estimate when it left
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

// ms per run of `runs` consecutive executions of candidate i of `problem` on its timer, each on
// the next input copy (*rotation counts them). How the tuner times a sample; `tunableop bench`
// measures with it too.
StatusOr<double> time_runs(TuningProblem& problem, size_t i, int runs, size_t* rotation);

// The protocol's phases (probe, screen, verify, halve, remeasure, decide) are TuningSession's,
// in src/core/tuning_session.h; Tuner composes them.
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
