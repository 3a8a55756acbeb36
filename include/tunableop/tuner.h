// The tuning protocol (DESIGN.md), generic over ops: an op describes one problem through
// TuningProblem, the tuner decides which candidate wins.
#pragma once

#include <cstddef>
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

class Tuner {
 public:
  Tuner(const TuningPolicy& policy, Logger& log) : policy_(policy), log_(log) {}
  // Fails only when not even Default can run (then the Status says why).
  StatusOr<TuningReport> find_fastest(TuningProblem& problem);

 private:
  TuningPolicy policy_;
  Logger& log_;
};

// Median, mean, std, min over samples (ms).
Measurement summarize(std::vector<double> samples_ms);

}  // namespace tunableop
