// The op framework's public face: what a candidate is, how problem-dependent candidates are
// registered, and the plan handle a caller runs many times. An op (GEMM, GemmAndBias, ...) is
// a tag type with `Params` and `Operands`; Candidate<Op>, CandidateFamily<Op> and Plan<Op> are
// the same for every op. docs/design.md, "How to add an op", walks through one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tunableop/choice.h"
#include "tunableop/status.h"
#include "tunableop/types.h"

namespace tunableop {

class Context;
class TuningProblem;

// What a candidate is, as data: bench tables group by it and logs print it, so nothing has to
// be parsed back out of names. The stored name stays the stable key in results files.
struct CandidateInfo {
  std::string library;    // who computes: "tunableop" (our kernels), "OpenBLAS", "cuBLASLt", ...
  std::string algorithm;  // how: "blocked", "skinny", "gemv", "algo", "heuristic", "default", ...
  std::vector<std::pair<std::string, std::string>> details;  // ("threads", "2"), ("tile", "23"), ...

  CandidateInfo& add(std::string key, std::string value) {
    details.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  std::string get(std::string_view key) const;  // "" when absent
  std::string family() const;                   // "library algorithm": a group of related candidates
  std::string to_string() const;                // "cuBLASLt algo (algo=66, tile=23)"
};

// One way to compute an op. Backends register these into Registry::list<Candidate<Op>>().
template <class Op>
struct Candidate {
  using Params = typename Op::Params;
  using Operands = typename Op::Operands;
  std::string name;  // stable, self-describing; "Default" for the plain library call
  DeviceKind device = DeviceKind::kCpu;
  int min_effort = 0;  // offered when policy.search_effort >= min_effort
  std::function<Status(const Params&)> supports;
  std::function<Status(const Params&, const Operands&)> run;
  std::function<size_t(const Params&)> workspace_bytes;  // optional
  CandidateInfo info;
};

// Candidates that exist only per problem (e.g. one per cuBLASLt algorithm found for it).
// `expand` lists the concrete candidates for p; `resolve` rebuilds one from its stored name
// (results file), or fails if it no longer applies.
template <class Op>
struct CandidateFamily {
  using Params = typename Op::Params;
  std::string prefix;  // names start with it, e.g. "Gemm_Lt_"
  DeviceKind device = DeviceKind::kCuda;
  int min_effort = 0;
  std::function<std::vector<Candidate<Op>>(const Params&, int search_effort)> expand;
  std::function<StatusOr<Candidate<Op>>(const Params&, const std::string& name)> resolve;
};

namespace detail {
template <class Op>
struct PlanSlot;  // the op framework's per-problem state (src/ops/framework/dispatch.h)
}  // namespace detail

// What a plan runs for its problem, and why (the context's Choice). Immutable once a plan
// holds it and kept as long as the context lives, so a caller may keep the pointer (an
// all-reduce communicator freezes the one its ranks agreed on).
template <class Op>
struct PlanDecision {
  const Candidate<Op>* candidate = nullptr;  // what a run calls; null: nothing can run, `error` says why
  const Candidate<Op>* fallback = nullptr;   // Default, when `candidate` is another one
  std::string solution;                      // the candidate's stored name
  ChoiceSource source = ChoiceSource::kNotTuned;
  size_t workspace_bytes = 0;  // what the candidate needs as scratch for the plan's problem
  Status error;
};

// For a caller that serves calls it did not make (the interposer), how a miss is tuned; both
// optional, used only when a plan decides (never on a run that finds its decision current).
template <class Op>
struct PlanHooks {
  using Params = typename Op::Params;
  using Operands = typename Op::Operands;
  // Default as the caller would run it (the interposer: the program's own call, replayed on the
  // tuning buffers). While a miss is tuned it stands in for the registered Default, as the time
  // to beat and the numerics reference, so that a candidate must beat exactly what the caller
  // would have run; should it fail, the registered Default runs in its place.
  std::function<Status(const Params&, const Operands&)> default_run;
  // Wraps the tuning problem (the interposer's held timer: the problem's runs timed as device
  // time only).
  std::function<std::unique_ptr<TuningProblem>(std::unique_ptr<TuningProblem>)> wrap_problem;
};

// One problem of one op, validated once, run many times: ctx.plan(params) makes it. A run
// compares the context's generation with the plan's (two atomic loads) and calls the chosen
// candidate: no strings, no locks, no allocation. When settings or results changed, the plan
// decides first (Context::decide: looks its problem up again, maybe tunes it on these operands).
// Capture policy: while the operands' stream captures a CUDA graph (the device runtime says so)
// a plan decides from stored results only, since tuning allocates and synchronizes; a miss runs
// Default for now (ChoiceSource::kDeferred) and is tuned on random operands at the first
// decision of the op outside a capture.
// A plan refers to its context, which must outlive it; plans may be copied and used from
// several threads at once. Every plan of a problem shares one decision (the framework's slot).
template <class Op>
class Plan {
 public:
  using Params = typename Op::Params;
  using Operands = typename Op::Operands;

  Plan() = default;
  // Made by make_plan (Context::plan); `slot` null means an empty problem (nothing to do).
  Plan(Context& ctx, detail::PlanSlot<Op>* slot, const Params& p) : ctx_(&ctx), slot_(slot), params_(p) {}

  Status run(const Operands& ops) const;
  // What run(ops) would call, deciding first when the decision is not current (a miss tuned on
  // copies of `ops`, with `hooks`). Runs nothing. Null for an empty problem.
  StatusOr<const PlanDecision<Op>*> decide(const Operands& ops, const PlanHooks<Op>& hooks = {}) const;
  // Decides now, before any run: a miss is tuned on random operands on `stream`, made only then
  // (the engine prepares its decode attention at full length before a CUDA graph captures it).
  StatusOr<const PlanDecision<Op>*> prepare(void* stream = nullptr) const;
  const Params& params() const { return params_; }  // normalized (dense defaults filled in)
  // The candidate run() calls now ("" before the first run decided it).
  std::string solution() const;
  bool valid() const { return ctx_ != nullptr; }

 private:
  Context* ctx_ = nullptr;
  detail::PlanSlot<Op>* slot_ = nullptr;
  Params params_{};
};

}  // namespace tunableop
