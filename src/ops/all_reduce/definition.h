// What the all-reduce tells the op framework. It uses the framework's candidate lists and lookup
// by stored name (Dispatcher<AllReduceOp>::candidates_for / find_candidate), Context::choose and
// the results file like every op; it does not use the one-device pieces (plans, the buffered
// tuning problem, OpBuffers): its operands live on every rank's device, so it brings its own
// tuning problem (tuning_problem.h) and keeps one decision per communicator (dispatch.cc).
#pragma once

#include <string>

#include "ops/framework/definition.h"
#include "ops/framework/problem_key.h"
#include "tunableop/all_reduce.h"

namespace tunableop::ops {

template <>
struct OpDefinition<AllReduceOp> {
  using P = AllReduceParams;
  static constexpr const char* kName = "AllReduce";
  static P normalize(const P& p) { return p; }
  static Status validate(const P& p) { return p.validate(); }
  static bool is_empty(const P& p) { return p.count == 0; }
  static std::string op_signature(const P& p) { return all_reduce_op_signature(p); }
  static std::string params_signature(const P& p) { return all_reduce_params_signature(p); }
  static ProblemKey key(const P& p) {
    return {int64_t(p.dtype), p.count, p.world_size, int64_t(p.op) + 2 * int64_t(p.epilogue) + 8 * int64_t(p.round_to)};
  }
};

}  // namespace tunableop::ops
