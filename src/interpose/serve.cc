#include "interpose/serve.h"

#include <fmt/format.h>

#include <string>

#include "interpose/gpu_state.h"
#ifdef TUNABLEOP_INTERPOSE_CUDA
#include "interpose/held_timer.h"
#endif
#include "ops/gemm/dispatch.h"
#include "ops/gemm_and_bias/dispatch.h"
#include "ops/scaled_gemm/dispatch.h"
#include "tunableop/safe_file.h"

namespace tunableop::interpose {

namespace {

// Whether a candidate's call reads C (then a failure part-way leaves C changed).
double beta_of(const GemmParams& p) { return p.beta; }
double beta_of(const GemmAndBiasParams& p) { return p.gemm.beta; }
double beta_of(const ScaledGemmParams&) { return 0.0; }

bool is_library_default(const DeviceEngine& dev, const std::string& name) {
  return name == (dev.device.kind == DeviceKind::kCuda ? "Default" : kProgramBlasName);
}

void record_untuned(DeviceEngine& dev, const std::string& op, const std::string& psig) {
  {
    std::lock_guard lock(dev.untuned_mu);
    if (!dev.untuned)
      dev.untuned = std::make_unique<UntunedFile>(
          absolute_path(results_path_for(dev.options.untuned_filename, std::to_string(dev.device.ordinal))));
  }
  Status st = dev.untuned->record(op, psig);
  if (!st.is_ok()) dev.ctx->log().warn(st.to_string());
}

// How the plan tunes a miss for the interposer: on a GPU its Default is the program's own call
// (CallSite::replay) and its clock counts device time only (held_timer.h).
template <class Op>
PlanHooks<Op> hooks_for(const CallSite& site, void* stream) {
  PlanHooks<Op> h;
  if (site.replay != nullptr)
    h.default_run = [replay = site.replay, call = site.replay_call](const typename Op::Params&,
                                                                    const typename Op::Operands& o) {
      return replay(call, o.a, o.b, o.c);
    };
#ifdef TUNABLEOP_INTERPOSE_CUDA
  if (site.gpu)
    h.wrap_problem = [stream](std::unique_ptr<TuningProblem> pr) { return with_held_timer(std::move(pr), stream); };
#endif
  return h;
}

template <class Op>
Outcome run(DeviceEngine& dev, const PlanDecision<Op>& d, const typename Op::Params& p, typename Op::Operands ops,
            const CallSite& site, bool capturing) {
  if (d.workspace_bytes > 0) {
    if (site.workspace_bytes >= d.workspace_bytes) {
      ops.workspace = site.workspace;
      ops.workspace_bytes = site.workspace_bytes;
    } else if (capturing) {
      void* w = dev.graph_workspace.get(d.workspace_bytes);
      if (w == nullptr) return {Reason::kCapturingNotReady};
      ops.workspace = w;
      ops.workspace_bytes = d.workspace_bytes;
    } else if (site.gpu) {
      // Eagerly the candidate uses its own scratch; a later capture of this problem will need
      // memory that outlives it.
      dev.graph_workspace.reserve(d.workspace_bytes);
    }
  }
  Status st = d.candidate->run(p, ops);
  if (st.is_ok()) return {Reason::kServed};
  if (site.gpu) gpu::clear_our_error();
  if (st.is_unsupported()) return {Reason::kCandidateDeclined};
  const bool beta0 = beta_of(p) == 0.0;
  dev.ctx->log().warn(fmt::format("interpose: {} failed ({}); {}", d.solution, st.to_string(),
                                  beta0 || !site.gpu ? "passing the call to the library" : "reporting the failure"));
  // With beta != 0 a candidate that failed part-way may have changed C: the library cannot
  // redo the call, so the program gets the error.
  if (beta0 || !site.gpu) return {Reason::kCandidateFailed};
  return {Reason::kServed, gpu::execution_failed_status()};
}

// The problem's plan slot (the op framework's table: ops::ProblemKey -> plan) decides, as for
// any plan: a hit costs a hashed lookup and a generation check. The interposer adds its rules
// (docs/interpose.md): a tuned library default and every miss go back to the program's library
// untouched; a miss while the stream captures is written to the untuned file; a thread that
// never made our handles passes through while capturing.
template <class Op>
Outcome serve(DeviceEngine& dev, const typename Op::Params& params, const typename Op::Operands& ops,
              const CallSite& site) {
  using Dispatch = ops::Dispatcher<Op>;
  Context& ctx = *dev.ctx;
  const typename Op::Params p = ops::OpDefinition<Op>::normalize(params);
  auto& slot = Dispatch::slot_for(ctx, p);
  // The capture query only where its answer matters: a decision to make, problems deferred by
  // an earlier capture (tuned now unless this call captures too), our handles, workspace.
  int capturing = -1;  // not asked yet
  auto is_capturing = [&] {
    if (capturing < 0) capturing = site.gpu && gpu::stream_capturing(site.stream) ? 1 : 0;
    return capturing == 1;
  };
  // Our handles: made outside a capture (creating one allocates), before anything resolves or
  // runs a candidate.
  auto ready = [&] {
    if (!site.gpu || gpu::thread_ready(dev.device.ordinal)) return true;
    if (is_capturing()) return false;
    gpu::make_thread_ready(dev.device.ordinal);
    return true;
  };
  if (site.gpu && Dispatch::has_deferred(ctx) && !is_capturing()) {
    gpu::make_thread_ready(dev.device.ordinal);
    Dispatch::tune_deferred(ctx);
    gpu::clear_our_error();
  }
  const bool deciding = !Dispatch::current(ctx, slot);
  const PlanDecision<Op>* d = nullptr;
  if (deciding) {
    if (!ready()) return {Reason::kCapturingNotReady};
    const PlanHooks<Op> hooks = hooks_for<Op>(site, site.stream);
    d = &Dispatch::decide(ctx, slot, p, typename Dispatch::TuneOn{&ops, site.stream, &hooks});
    if (site.gpu) gpu::clear_our_error();
  } else {
    d = slot.decision.load(std::memory_order_acquire);
  }
  switch (d->source) {
    case ChoiceSource::kStored:
    case ChoiceSource::kTuned: break;
    case ChoiceSource::kDeferred:
      record_untuned(dev, slot.op_signature, slot.params_signature);
      return {Reason::kCapturingUntuned};
    case ChoiceSource::kNotTuned:
      // First met while capturing: written to the untuned file whatever --record says.
      if (deciding && is_capturing()) {
        record_untuned(dev, slot.op_signature, slot.params_signature);
        return {Reason::kCapturingUntuned};
      }
      return {Reason::kNotTuned};
    case ChoiceSource::kDisabled: return {Reason::kNotTuned};
    case ChoiceSource::kTuningFailed: return {Reason::kTuningFailed};
    case ChoiceSource::kDidNotFit: return {Reason::kTooLargeToTune};
  }
  if (!d->candidate) return {Reason::kTuningFailed};
  if (is_library_default(dev, d->solution)) return {Reason::kLibraryDefault};
  if (!ready()) return {Reason::kCapturingNotReady};
  return run<Op>(dev, *d, p, ops, site, d->workspace_bytes > site.workspace_bytes && is_capturing());
}

}  // namespace

Outcome serve_gemm(DeviceEngine& dev, const GemmParams& p, const GemmOperands& ops, const CallSite& site) {
  return serve<GemmOp>(dev, p, ops, site);
}

Outcome serve_gemm_and_bias(DeviceEngine& dev, const GemmAndBiasParams& p, const GemmAndBiasOperands& ops,
                            const CallSite& site) {
  return serve<GemmAndBiasOp>(dev, p, ops, site);
}

Outcome serve_scaled_gemm(DeviceEngine& dev, const ScaledGemmParams& p, const ScaledGemmOperands& ops,
                          const CallSite& site) {
  return serve<ScaledGemmOp>(dev, p, ops, site);
}

}  // namespace tunableop::interpose
