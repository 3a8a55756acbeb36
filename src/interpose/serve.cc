#include "interpose/serve.h"

#include <fmt/format.h>

#include <string>

#include "interpose/gpu_state.h"
#ifdef TUNABLEOP_INTERPOSE_CUDA
#include "interpose/held_timer.h"
#endif
#include "ops/gemm/dispatch.h"
#include "ops/gemm/tuning_problem.h"
#include "ops/gemm_and_bias/dispatch.h"

namespace tunableop::interpose {

namespace {

// What serve() needs to know about an op, for GEMM and GemmAndBias alike.
struct GemmOp {
  using Framework = tunableop::GemmOp;  // the op framework's GEMM
  using Params = GemmParams;
  using Operands = GemmOperands;
  using Candidate = GemmCandidate;
  using Family = GemmCandidateFamily;
  using Problem = GemmTuningProblem;
  static constexpr bool kDeferrable = true;  // `tunableop tune` and tune_gemm() take it
  static ProblemKey key(const Params& p) { return ProblemKey::of(p); }
  static const GemmParams& gemm(const Params& p) { return p; }
  static DecisionCache<Candidate>& cache(DeviceEngine& d) { return d.gemm_decisions; }
  static std::string op_signature(const Params& p) { return gemm_op_signature(p); }
  static std::string params_signature(const Params& p) { return gemm_params_signature(p); }
};

struct BiasOp {
  using Framework = tunableop::GemmAndBiasOp;
  using Params = GemmAndBiasParams;
  using Operands = GemmAndBiasOperands;
  using Candidate = GemmAndBiasCandidate;
  using Family = GemmAndBiasCandidateFamily;
  using Problem = GemmAndBiasTuningProblem;
  static constexpr bool kDeferrable = false;
  static ProblemKey key(const Params& p) { return ProblemKey::of(p.gemm, int(p.act)); }
  static const GemmParams& gemm(const Params& p) { return p.gemm; }
  static DecisionCache<Candidate>& cache(DeviceEngine& d) { return d.bias_decisions; }
  static std::string op_signature(const Params& p) { return gemm_and_bias_op_signature(p); }
  static std::string params_signature(const Params& p) { return gemm_and_bias_params_signature(p); }
};

template <class Op>
using DecisionOf = Decision<typename Op::Candidate>;

bool is_library_default(const DeviceEngine& dev, const std::string& name) {
  return name == (dev.device.kind == DeviceKind::kCuda ? "Default" : kProgramBlasName);
}

// The decision for a stored solution name (valid: Context::choose or the caller checked it).
template <class Op>
DecisionOf<Op> decision_for(DeviceEngine& dev, const typename Op::Params& p, const std::string& key,
                            const std::string& name) {
  DecisionOf<Op> d;
  if (is_library_default(dev, name)) {
    d.kind = DecisionOf<Op>::Kind::kLibrary;
    return d;
  }
  d.candidate = ops::Dispatcher<typename Op::Framework>::cached_candidate(*dev.ctx, p, name);
  if (!d.candidate) {
    d.kind = DecisionOf<Op>::Kind::kTuningFailed;
    return d;
  }
  d.kind = DecisionOf<Op>::Kind::kRun;
  d.workspace = d.candidate->workspace_bytes ? d.candidate->workspace_bytes(p) : 0;
  return d;
}

// "Default" as the program would run it: its own call, replayed on the tuning buffers. Should
// the replay fail (unexpected: the same call just succeeded for the program), our Default runs.
template <class Op>
typename Op::Candidate program_default(typename Op::Candidate ours, const CallSite& site) {
  ours.run = [replay = site.replay, call = site.replay_call, fallback = ours.run](const typename Op::Params& p,
                                                                                  const typename Op::Operands& o) {
    Status st = replay(call, o.a, o.b, o.c);
    return st.is_ok() ? st : fallback(p, o);
  };
  ours.info.details.emplace_back("call", "the program's own");
  return ours;
}

// Outside a capture: Context::choose looks the problem up, tunes it (tuning on, on copies of the
// program's operands) or records it (--record). On a GPU the tuning measures device time only
// (held_timer.h) and its Default is the program's own call when the call site can replay it.
template <class Op>
const DecisionOf<Op>* decide(DeviceEngine& dev, const typename Op::Params& p, const typename Op::Operands& ops,
                             const CallSite& site) {
  Context& ctx = *dev.ctx;
  const std::string op = Op::op_signature(p), psig = Op::params_signature(p), key = op + "," + psig;
  using Dispatch = ops::Dispatcher<typename Op::Framework>;
  auto is_valid = [&](const std::string& name) { return Dispatch::cached_candidate(ctx, p, name) != nullptr; };
  auto make_problem = [&]() -> StatusOr<std::unique_ptr<TuningProblem>> {
    const DeviceRuntime* rt = ctx.registry().runtime(ctx.device().kind);
    if (rt == nullptr) return Status::unsupported("no runtime registered for " + ctx.device().to_string());
    const TuningPolicy& policy = dev.options.policy;
    auto candidates = Dispatch::candidates_for(ctx, p, policy.search_effort);
    if (site.replay != nullptr && !candidates.empty() && candidates.front().name == "Default")
      candidates.front() = program_default<Op>(candidates.front(), site);
    auto pr = Op::Problem::create(p, ops, std::move(candidates), *rt, policy, ctx.log());
    if (!pr.is_ok()) return pr.status();
    std::unique_ptr<TuningProblem> problem = std::move(*pr);
#ifdef TUNABLEOP_INTERPOSE_CUDA
    if (site.gpu) problem = with_held_timer(std::move(problem), ops.stream);
#endif
    return problem;
  };
  auto chosen = ctx.choose(op, psig, is_valid, make_problem);
  const std::string name = chosen.is_ok() ? *chosen : "Default";
  auto stored = ctx.results().lookup(op, psig);
  DecisionOf<Op> d;
  if (!stored || stored->solution != name) {
    // choose() answered Default without a result behind it.
    d.kind = dev.options.tuning ? DecisionOf<Op>::Kind::kTuningFailed : DecisionOf<Op>::Kind::kNotTuned;
  } else {
    d = decision_for<Op>(dev, p, key, name);
  }
  ctx.log().log(2, fmt::format("interpose: {}({}) -> {}", op, psig,
                               d.kind == DecisionOf<Op>::Kind::kRun       ? name
                               : d.kind == DecisionOf<Op>::Kind::kLibrary ? "the library's own call (tuned)"
                                                                          : "the library's own call (no result)"));
  return Op::cache(dev).insert(Op::key(p), std::move(d));
}

void record_untuned(DeviceEngine& dev, const std::string& op, const std::string& psig) {
  {
    std::lock_guard lock(dev.deferred_mu);
    if (!dev.untuned)
      dev.untuned = std::make_unique<UntunedFile>(
          results_path_for(dev.options.untuned_filename, std::to_string(dev.device.ordinal)));
  }
  Status st = dev.untuned->record(op, psig);
  if (!st.is_ok()) dev.ctx->log().warn(st.to_string());
}

// While capturing: a stored result only (loaded when the device engine was made); a miss is
// recorded and, where possible, deferred to the next call outside a capture.
template <class Op>
const DecisionOf<Op>* decide_while_capturing(DeviceEngine& dev, const typename Op::Params& p, Reason* why) {
  Context& ctx = *dev.ctx;
  const std::string op = Op::op_signature(p), psig = Op::params_signature(p);
  auto stored = ctx.results().lookup(op, psig);
  if (!stored) {
    record_untuned(dev, op, psig);
    if constexpr (Op::kDeferrable) {
      if (dev.options.tuning) {
        std::lock_guard lock(dev.deferred_mu);
        dev.deferred.push_back(Op::gemm(p));
        dev.has_deferred.store(true, std::memory_order_relaxed);
      }
    }
    *why = Reason::kCapturingUntuned;
    return nullptr;
  }
  // Resolving a candidate may create our handles: only on a thread that has them already.
  if (!gpu::thread_ready(dev.device.ordinal)) {
    *why = Reason::kCapturingNotReady;
    return nullptr;
  }
  const std::string key = op + "," + psig;
  if (!is_library_default(dev, stored->solution) &&
      !ops::Dispatcher<typename Op::Framework>::cached_candidate(ctx, p, stored->solution)) {
    *why = Reason::kCapturingUntuned;  // stale: re-tuned at the next call outside a capture
    return nullptr;
  }
  return Op::cache(dev).insert(Op::key(p), decision_for<Op>(dev, p, key, stored->solution));
}

// GEMMs first seen while capturing: tuned on random data now that no capture is running.
void tune_deferred(DeviceEngine& dev) {
  std::vector<GemmParams> todo;
  {
    std::lock_guard lock(dev.deferred_mu);
    todo.swap(dev.deferred);
    dev.has_deferred.store(false, std::memory_order_relaxed);
    if (todo.empty()) return;
  }
  for (const GemmParams& p : todo) {
    if (dev.ctx->results().contains(gemm_op_signature(p), gemm_params_signature(p))) continue;
    auto r = tune_gemm(*dev.ctx, p);
    if (!r.is_ok())
      dev.ctx->log().warn(fmt::format("interpose: tuning {}({}) first seen in a CUDA graph failed: {}",
                                      gemm_op_signature(p), gemm_params_signature(p), r.status().to_string()));
    gpu::clear_our_error();
  }
}

template <class Op>
Outcome run(DeviceEngine& dev, const DecisionOf<Op>& d, const typename Op::Params& p, typename Op::Operands ops,
            const CallSite& site, bool capturing) {
  if (d.workspace > 0) {
    if (site.workspace_bytes >= d.workspace) {
      ops.workspace = site.workspace;
      ops.workspace_bytes = site.workspace_bytes;
    } else if (capturing) {
      void* w = dev.graph_workspace.get(d.workspace);
      if (w == nullptr) return {Reason::kCapturingNotReady};
      ops.workspace = w;
      ops.workspace_bytes = d.workspace;
    } else if (site.gpu) {
      // Eagerly the candidate uses its own scratch; a later capture of this problem will need
      // memory that outlives it.
      dev.graph_workspace.reserve(d.workspace);
    }
  }
  Status st = d.candidate->run(p, ops);
  if (st.is_ok()) return {Reason::kServed};
  if (site.gpu) gpu::clear_our_error();
  if (st.is_unsupported()) return {Reason::kCandidateDeclined};
  dev.ctx->log().warn(
      fmt::format("interpose: {} failed ({}); {}", d.candidate->name, st.to_string(),
                  Op::gemm(p).beta == 0.0 || !site.gpu ? "passing the call to the library" : "reporting the failure"));
  // With beta != 0 a candidate that failed part-way may have changed C: the library cannot
  // redo the call, so the program gets the error.
  if (Op::gemm(p).beta == 0.0 || !site.gpu) return {Reason::kCandidateFailed};
  return {Reason::kServed, gpu::execution_failed_status()};
}

template <class Op>
Outcome serve(DeviceEngine& dev, const typename Op::Params& p, const typename Op::Operands& ops, const CallSite& site) {
  const DecisionOf<Op>* d = Op::cache(dev).find(Op::key(p));
  // GEMMs first met inside a capture are tuned at the next call outside one (one relaxed load).
  const bool deferred = site.gpu && dev.has_deferred.load(std::memory_order_relaxed);
  bool capturing = false;
  if (site.gpu && (d == nullptr || d->kind == DecisionOf<Op>::Kind::kRun || deferred))
    capturing = gpu::stream_capturing(site.stream);
  if (deferred && !capturing) {
    gpu::make_thread_ready(dev.device.ordinal);
    tune_deferred(dev);
    gpu::clear_our_error();
  }
  if (d == nullptr) {
    if (capturing) {
      Reason why = Reason::kCapturingUntuned;
      d = decide_while_capturing<Op>(dev, p, &why);
      if (d == nullptr) return {why};
    } else {
      if (site.gpu) gpu::make_thread_ready(dev.device.ordinal);
      d = decide<Op>(dev, p, ops, site);
      if (site.gpu) gpu::clear_our_error();
    }
  }
  switch (d->kind) {
    case DecisionOf<Op>::Kind::kLibrary: return {Reason::kLibraryDefault};
    case DecisionOf<Op>::Kind::kNotTuned: return {Reason::kNotTuned};
    case DecisionOf<Op>::Kind::kTuningFailed: return {Reason::kTuningFailed};
    case DecisionOf<Op>::Kind::kRun: break;
  }
  if (site.gpu && !gpu::thread_ready(dev.device.ordinal)) {
    // A thread that only ever hit decisions other threads made: make its handles now, outside a
    // capture, or pass through while capturing.
    if (capturing) return {Reason::kCapturingNotReady};
    gpu::make_thread_ready(dev.device.ordinal);
  }
  return run<Op>(dev, *d, p, ops, site, capturing);
}

}  // namespace

Outcome serve_gemm(DeviceEngine& dev, const GemmParams& p, const GemmOperands& ops, const CallSite& site) {
  return serve<GemmOp>(dev, p, ops, site);
}

Outcome serve_gemm_and_bias(DeviceEngine& dev, const GemmAndBiasParams& p, const GemmAndBiasOperands& ops,
                            const CallSite& site) {
  return serve<BiasOp>(dev, p, ops, site);
}

}  // namespace tunableop::interpose
