// The all-reduce's tuning problem: its operands live on every rank's device, so it does not fit
// the framework's one-device BufferedTuningProblem; it implements core's TuningProblem directly
// over a Communicator, in group mode (one thread runs the collective for every rank).
//   inputs    random per rank (a fixed seed per rank), never written
//   timing    out of place (input -> output), the communicator's streams; its timer reports
//             the slowest rank
//   numerics  out of place on NaN-poisoned outputs, then in place, each compared with the sum
//             computed on the host, and every rank's output must be the same bits;
//             kAddResidual: out of place into a random residual stream (the same on every
//             rank, as tensor parallelism's is), compared with residual + round(sum)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tunableop/all_reduce.h"
#include "tunableop/tuner.h"

namespace tunableop::ops {

// What the all-reduce's tuning measures on, the same in one process and across processes
// (process_tuning.h): rank r's input (random, seeded by r; at least 16 bytes), what an output
// holds before a run (NaN in p.dtype, or the residual stream for kAddResidual: random, the same
// on every rank), and the fp64 result every rank must reach.
std::vector<uint8_t> tuning_input(const AllReduceParams& p, int rank);
std::vector<uint8_t> tuning_initial_output(const AllReduceParams& p);
std::vector<double> tuning_reference(const AllReduceParams& p, const std::vector<std::vector<uint8_t>>& inputs);
// Rank r's output against the reference and against rank 0's bits (`first`; null for rank 0).
// `name` and `how` ("out of place", ...) are for the message.
Status check_rank_output(const AllReduceParams& p, const std::string& name, const char* how, int rank,
                         const void* output, const void* first, const std::vector<double>& ref);

class AllReduceTuningProblem final : public TuningProblem {
 public:
  // `candidates` start with Default.
  static StatusOr<std::unique_ptr<AllReduceTuningProblem>> create(Communicator& comm, const AllReduceParams& p,
                                                                  std::vector<AllReduceCandidate> candidates);
  ~AllReduceTuningProblem() override;

  std::string op_signature() const override { return all_reduce_op_signature(p_); }
  std::string params_signature() const override { return all_reduce_params_signature(p_); }
  size_t candidate_count() const override { return cands_.size(); }
  std::string candidate_name(size_t i) const override { return cands_[i].name; }
  Status supports(size_t i) override { return cands_[i].supports(p_); }
  Status check_numerics(size_t i) override;
  Status run(size_t i, size_t) override { return cands_[i].run(p_, out_of_place_); }
  size_t rotation_count() const override { return 1; }  // a collective's input is fresh in cache
  Timer& timer() override { return *timer_; }
  Status recover() override { return comm_.recover(); }

 private:
  AllReduceTuningProblem(Communicator& comm, const AllReduceParams& p, std::vector<AllReduceCandidate> c)
      : comm_(comm), p_(p), cands_(std::move(c)) {}
  Status synchronize_all();
  // Runs candidate i with `ops` and compares every rank's output with the reference.
  Status check_outputs(size_t i, const AllReduceOperands& ops, const char* how);

  Communicator& comm_;
  AllReduceParams p_;
  std::vector<AllReduceCandidate> cands_;
  std::vector<void*> in_, out_;                // per rank, on its device
  std::vector<std::vector<uint8_t>> host_in_;  // per rank
  std::vector<uint8_t> poison_;                // tuning_initial_output
  std::vector<double> ref_;
  AllReduceOperands out_of_place_, in_place_;
  std::unique_ptr<Timer> timer_;
};

}  // namespace tunableop::ops
