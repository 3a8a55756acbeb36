// ScaledGemm's instantiation of the op framework.
#include "ops/scaled_gemm/dispatch.h"

namespace tunableop {

template class Plan<ScaledGemmOp>;
template class RandomOperands<ScaledGemmOp>;
template struct OpTools<ScaledGemmOp>;

Status scaled_gemm(Context& ctx, const ScaledGemmParams& p, const ScaledGemmOperands& ops) {
  return ScaledGemmDispatch::call(ctx, p, ops);
}

StatusOr<ScaledGemmPlan> make_plan(Context& ctx, const ScaledGemmParams& p) {
  return ScaledGemmDispatch::make_plan(ctx, p);
}

}  // namespace tunableop
