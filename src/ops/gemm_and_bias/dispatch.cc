// gemm_and_bias(): lookup -> run the chosen candidate; miss -> tune or Default (Context::choose),
// exactly as gemm() does.
#include "ops/gemm_and_bias/dispatch.h"

#include <fmt/format.h>

#include "core/boundary.h"
#include "ops/common/candidate_lookup.h"

#include "ops/gemm_and_bias/tuning_problem.h"

namespace tunableop {

namespace {

const DeviceRuntime* runtime_for(Context& ctx) { return ctx.registry().runtime(ctx.device().kind); }

std::shared_ptr<const GemmAndBiasCandidate> cached_candidate(Context& ctx, const GemmAndBiasParams& p,
                                                             const std::string& key_sig, const std::string& name) {
  return ops::cached_candidate<GemmAndBiasCandidate, GemmAndBiasCandidateFamily>(ctx, p, key_sig, name);
}

}  // namespace

std::vector<GemmAndBiasCandidate> gemm_and_bias_candidates_for(Context& ctx, const GemmAndBiasParams& p, int effort) {
  return ops::candidates_for<GemmAndBiasCandidate, GemmAndBiasCandidateFamily>(ctx, p, effort);
}

StatusOr<GemmAndBiasCandidate> find_gemm_and_bias_candidate(Context& ctx, const GemmAndBiasParams& p,
                                                            const std::string& name) {
  return ops::find_candidate<GemmAndBiasCandidate, GemmAndBiasCandidateFamily>(ctx, p, name);
}

static Status gemm_and_bias_unguarded(Context& ctx, const GemmAndBiasParams& params, const GemmAndBiasOperands& ops) {
  const GemmAndBiasParams p = params.with_defaults();
  TUNABLEOP_RETURN_IF_ERROR(p.validate());
  const GemmParams& g = p.gemm;
  if (g.m == 0 || g.n == 0) return Status::ok();
  if ((g.k > 0 && (!ops.a || !ops.b)) || !ops.c || !ops.bias)
    return Status::invalid_argument("GemmAndBias operand pointer is null (a, b, bias and c must be set)");
  const std::string op = gemm_and_bias_op_signature(p), psig = gemm_and_bias_params_signature(p);
  const std::string key = op + "," + psig;
  auto is_valid = [&](const std::string& name) { return cached_candidate(ctx, p, key, name) != nullptr; };
  auto make_problem = [&]() -> StatusOr<std::unique_ptr<TuningProblem>> {
    const DeviceRuntime* rt = runtime_for(ctx);
    if (!rt) return Status::unsupported("no runtime registered for " + ctx.device().to_string());
    Options o = ctx.config().snapshot();
    auto pr = GemmAndBiasTuningProblem::create(p, ops, gemm_and_bias_candidates_for(ctx, p, o.policy.search_effort),
                                               *rt, o.policy, ctx.log());
    if (!pr.is_ok()) return pr.status();
    return std::unique_ptr<TuningProblem>(std::move(*pr));
  };
  auto chosen = ctx.choose(op, psig, is_valid, make_problem);
  std::string name = chosen.is_ok() ? *chosen : "Default";
  if (auto cand = cached_candidate(ctx, p, key, name)) {
    Status st = cand->run(p, ops);
    if (st.is_ok() || name == "Default") return st;
    std::string msg = fmt::format("{}({}): {} {} ({}); running Default", op, psig, name,
                                  st.is_unsupported() ? "does not apply to these operands" : "failed", st.message());
    if (st.is_unsupported()) {
      ctx.log().log(2, msg);
    } else {
      ctx.log().warn(msg);
      if (const DeviceRuntime* rt = runtime_for(ctx)) (void)rt->recover();
    }
  }
  auto def = cached_candidate(ctx, p, key, "Default");
  if (!def)
    return Status::unsupported(
        fmt::format("no Default GemmAndBias supports {}({}) on {}", op, psig, ctx.device().to_string()));
  return def->run(p, ops);
}

Status gemm_and_bias(Context& ctx, const GemmAndBiasParams& params, const GemmAndBiasOperands& ops) {
  return status_boundary(
      [&] {
        return "gemm_and_bias " + gemm_and_bias_op_signature(params) + "(" + gemm_and_bias_params_signature(params) +
               ")";
      },
      [&] { return gemm_and_bias_unguarded(ctx, params, ops); });
}

}  // namespace tunableop
