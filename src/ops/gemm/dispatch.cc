// gemm(): lookup -> run the chosen candidate; miss -> tune or Default (Context::choose).
#include "ops/gemm/dispatch.h"

#include <fmt/format.h>

#include <map>
#include <random>
#include <shared_mutex>

#include "core/boundary.h"
#include "core/checked_size.h"
#include "ops/common/candidate_lookup.h"
#include "ops/gemm/reference.h"
#include "ops/gemm/tuning_problem.h"

namespace tunableop {

namespace {

const DeviceRuntime* runtime_for(Context& ctx) { return ctx.registry().runtime(ctx.device().kind); }

std::shared_ptr<const GemmCandidate> cached_candidate(Context& ctx, const GemmParams& p, const std::string& psig,
                                                      const std::string& name) {
  return ops::cached_candidate<GemmCandidate, GemmCandidateFamily>(ctx, p, gemm_op_signature(p) + "," + psig, name);
}

}  // namespace

std::vector<GemmCandidate> gemm_candidates_for(Context& ctx, const GemmParams& p, int effort) {
  return ops::candidates_for<GemmCandidate, GemmCandidateFamily>(ctx, p, effort);
}

StatusOr<GemmCandidate> find_gemm_candidate(Context& ctx, const GemmParams& p, const std::string& name) {
  return ops::find_candidate<GemmCandidate, GemmCandidateFamily>(ctx, p, name);
}

static Status gemm_unguarded(Context& ctx, const GemmParams& params, const GemmOperands& ops) {
  const GemmParams p = params.with_defaults();
  TUNABLEOP_RETURN_IF_ERROR(p.validate());
  if (p.m == 0 || p.n == 0) return Status::ok();
  if ((p.k > 0 && (!ops.a || !ops.b)) || !ops.c)
    return Status::invalid_argument("GEMM operand pointer is null (a, b and c must be set)");
  const std::string op = gemm_op_signature(p), psig = gemm_params_signature(p);
  auto is_valid = [&](const std::string& name) { return cached_candidate(ctx, p, psig, name) != nullptr; };
  auto make_problem = [&]() -> StatusOr<std::unique_ptr<TuningProblem>> {
    const DeviceRuntime* rt = runtime_for(ctx);
    if (!rt) return Status::unsupported("no runtime registered for " + ctx.device().to_string());
    Options o = ctx.config().snapshot();
    auto pr = GemmTuningProblem::create(p, ops, gemm_candidates_for(ctx, p, o.policy.search_effort), *rt, o.policy,
                                        ctx.log());
    if (!pr.is_ok()) return pr.status();
    return std::unique_ptr<TuningProblem>(std::move(*pr));
  };
  auto chosen = ctx.choose(op, psig, is_valid, make_problem);
  std::string name = chosen.is_ok() ? *chosen : "Default";
  auto cand = cached_candidate(ctx, p, psig, name);
  if (cand) {
    Status st = cand->run(p, ops);
    if (st.is_ok() || name == "Default") return st;
    // "Unsupported" at run time is normal (e.g. pointers less aligned than the tuned buffers);
    // anything else is a real failure worth a warning.
    std::string msg = fmt::format("{}({}): {} {} ({}); running Default", op, psig, name,
                                  st.is_unsupported() ? "does not apply to these operands" : "failed", st.message());
    if (st.is_unsupported())
      ctx.log().log(2, msg);
    else
      ctx.log().warn(msg);
    if (!st.is_unsupported())
      if (const DeviceRuntime* rt = runtime_for(ctx)) (void)rt->recover();
  }
  auto def = cached_candidate(ctx, p, psig, "Default");
  if (!def)
    return Status::unsupported(
        fmt::format("no Default GEMM supports {}({}) on {}", op, psig, ctx.device().to_string()));
  return def->run(p, ops);
}

Status gemm(Context& ctx, const GemmParams& params, const GemmOperands& ops) {
  return status_boundary(
      [&] { return "gemm " + gemm_op_signature(params) + "(" + gemm_params_signature(params) + ")"; },
      [&] { return gemm_unguarded(ctx, params, ops); });
}

Status linear(Context& ctx, DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w, void* y,
              void* stream) {
  GemmParams p = linear_params(dtype, tokens, in, out);
  GemmOperands ops{w, x, y, stream};
  return gemm(ctx, p, ops);
}

StatusOr<std::unique_ptr<GemmBuffers>> GemmBuffers::random(Context& ctx, const GemmParams& params, uint64_t seed,
                                                           void* stream) {
  std::unique_ptr<GemmBuffers> b(new GemmBuffers());
  b->p_ = params.with_defaults();
  TUNABLEOP_RETURN_IF_ERROR(b->p_.validate());
  b->rt_ = runtime_for(ctx);
  b->stream_ = stream;
  if (!b->rt_) return Status::unsupported("no runtime registered for " + ctx.device().to_string());
  const GemmParams& p = b->p_;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const size_t es = dtype_size(p.dtype);
  // Checked before anything is allocated: host staging copies, and on the CPU the operands too.
  const CheckedInt total = (CheckedInt(p.a_span()) + p.b_span() + p.c_span()) * int64_t(es);
  TUNABLEOP_RETURN_IF_ERROR(check_host_allocation(b->rt_->kind == DeviceKind::kCpu ? total * 2 : total,
                                                  "random operands of " + gemm_params_signature(p)));
  for (auto [ptr, n] : {std::pair{&b->a_, p.a_span()}, {&b->b_, p.b_span()}, {&b->c_, p.c_span()}}) {
    std::vector<uint8_t> host(size_t(std::max<int64_t>(n, 1)) * es);
    for (int64_t i = 0; i < n; ++i) store_from_double(p.dtype, host.data(), i, dist(rng));
    auto m = b->rt_->alloc(host.size());
    if (!m.is_ok()) return m.status();
    *ptr = *m;
    TUNABLEOP_RETURN_IF_ERROR(b->rt_->copy(*ptr, host.data(), host.size(), DeviceRuntime::Copy::kHostToDevice, stream));
  }
  TUNABLEOP_RETURN_IF_ERROR(b->rt_->synchronize(stream));
  return b;
}

GemmBuffers::~GemmBuffers() {
  if (!rt_) return;
  for (void* p : {a_, b_, c_})
    if (p) rt_->free(p);
}

static StatusOr<TuningReport> tune_gemm_unguarded(Context& ctx, const GemmParams& params, bool retune, void* stream) {
  auto bufs = GemmBuffers::random(ctx, params, 1, stream);
  if (!bufs.is_ok()) return bufs.status();
  const GemmParams& p = (*bufs)->params();
  const DeviceRuntime* rt = runtime_for(ctx);
  Options o = ctx.config().snapshot();
  auto pr = GemmTuningProblem::create(p, (*bufs)->operands(), gemm_candidates_for(ctx, p, o.policy.search_effort), *rt,
                                      o.policy, ctx.log());
  if (!pr.is_ok()) return pr.status();
  return ctx.tune(**pr, retune);
}

StatusOr<TuningReport> tune_gemm(Context& ctx, const GemmParams& params, bool retune, void* stream) {
  return status_boundary(
      [&] { return "tuning " + gemm_op_signature(params) + "(" + gemm_params_signature(params) + ")"; },
      [&] { return tune_gemm_unguarded(ctx, params, retune, stream); });
}

}  // namespace tunableop
