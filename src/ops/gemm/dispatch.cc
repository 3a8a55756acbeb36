// GEMM's instantiation of the op framework: gemm(), plans, offline tuning, candidate lookup.
#include "ops/gemm/dispatch.h"

namespace tunableop {

using GemmDispatch = ops::Dispatcher<GemmOp>;
template class Plan<GemmOp>;
template class RandomOperands<GemmOp>;
template struct OpTools<GemmOp>;

std::vector<GemmCandidate> gemm_candidates_for(Context& ctx, const GemmParams& p, int effort) {
  return GemmDispatch::candidates_for(ctx, p, effort);
}

StatusOr<GemmCandidate> find_gemm_candidate(Context& ctx, const GemmParams& p, const std::string& name) {
  return GemmDispatch::find_candidate(ctx, p, name);
}

Status gemm(Context& ctx, const GemmParams& p, const GemmOperands& ops) { return GemmDispatch::call(ctx, p, ops); }

StatusOr<GemmPlan> make_plan(Context& ctx, const GemmParams& p) { return GemmDispatch::make_plan(ctx, p); }

StatusOr<TuningReport> tune_gemm(Context& ctx, const GemmParams& p, bool retune, void* stream) {
  return GemmDispatch::tune(ctx, p, retune, stream);
}

Status linear(Context& ctx, DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w, void* y,
              void* stream) {
  GemmParams p = linear_params(dtype, tokens, in, out);
  GemmOperands ops{w, x, y, stream};
  return gemm(ctx, p, ops);
}

}  // namespace tunableop
