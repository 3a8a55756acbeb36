// The op framework's public face: what a candidate is, how problem-dependent candidates are
// registered, and the plan handle a caller runs many times. An op (GEMM, GemmAndBias, ...) is
// a tag type with `Params` and `Operands`; Candidate<Op>, CandidateFamily<Op> and Plan<Op> are
// the same for every op. docs/design.md, "How to add an op", walks through one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tunableop/status.h"
#include "tunableop/types.h"

namespace tunableop {

class Context;

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

// One problem of one op, validated once, run many times: ctx.plan(params) makes it. A run
// compares the context's generation with the plan's (two atomic loads) and calls the chosen
// candidate: no strings, no locks, no allocation. When settings or results changed, the plan
// revalidates first (looks its problem up again, maybe tunes it on these operands).
// A plan refers to its context, which must outlive it; plans may be copied and used from
// several threads at once.
template <class Op>
class Plan {
 public:
  using Params = typename Op::Params;
  using Operands = typename Op::Operands;

  Plan() = default;
  // Made by make_plan (Context::plan); `slot` null means an empty problem (nothing to do).
  Plan(Context& ctx, detail::PlanSlot<Op>* slot, const Params& p) : ctx_(&ctx), slot_(slot), params_(p) {}

  Status run(const Operands& ops) const;
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
