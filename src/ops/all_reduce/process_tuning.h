// How the ranks of a process-mode communicator (one process per rank) agree on the candidate
// of a message size: rank 0 decides as in one process (results file; on a miss the tuner over
// a TuningProblem), but every measurement is a collective, so each step of it is a command
// that rank 0 broadcasts and every rank carries out on its own buffers:
//   create   each rank makes its input (seeded by rank, as one process does) and output
//   check i  candidate i out of place on NaN-poisoned outputs, then in place; the outputs are
//            gathered at rank 0, which compares them with the fp64 sum and requires the same
//            bits on every rank
//   run i    one collective of candidate i (timed runs; nothing comes back)
//   start / stop   a timed region on every rank's device; rank 0 takes the slowest rank's time
//   probe c  one collective of candidate c on zeroed buffers; every rank's status, agreed
//   recover  after a failure: every rank's device checked
//   finish   the decision: every rank runs candidate c from now on (or none, and says why)
// Followers sit in follow_process_decision() until finish. Every command is carried out on
// every rank in the same order, so the collectives of the candidates pair up.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tunableop/all_reduce.h"
#include "tunableop/choice.h"
#include "tunableop/tuner.h"

namespace tunableop::ops {

// Rank 0's end.
class ProcessDecisionDriver {
 public:
  ProcessDecisionDriver(Context& ctx, Communicator& comm, const AllReduceParams& p);
  // The tuning problem over every rank's buffers (`candidates` start with Default).
  StatusOr<std::unique_ptr<TuningProblem>> problem(std::vector<AllReduceCandidate> candidates);
  // One collective of `c` on zeroed buffers on every rank: the agreed status.
  Status probe(const AllReduceCandidate& c);
  Status recover();
  // Every rank runs `solution` from now on (or, with `why` not ok, nothing: every call fails
  // with it).
  Status finish(const std::string& solution, ChoiceSource source, const Status& why);

 private:
  Context& ctx_;
  Communicator& comm_;
  AllReduceParams p_;
};

// A follower's end: carries out rank 0's commands until it finishes; the candidate it chose
// and why (or the error every call of this size answers).
struct ProcessDecision {
  std::string solution;
  ChoiceSource source = ChoiceSource::kNotTuned;
  Status error;
};
StatusOr<ProcessDecision> follow_process_decision(Context& ctx, Communicator& comm, const AllReduceParams& p);

}  // namespace tunableop::ops
