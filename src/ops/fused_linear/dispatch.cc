// FusedLinear's instantiation of the op framework.
#include "ops/fused_linear/dispatch.h"

namespace tunableop {

template class Plan<FusedLinearOp>;
template class RandomOperands<FusedLinearOp>;
template struct OpTools<FusedLinearOp>;

Status fused_linear(Context& ctx, const FusedLinearParams& p, const FusedLinearOperands& ops) {
  return FusedLinearDispatch::call(ctx, p, ops);
}

StatusOr<FusedLinearPlan> make_plan(Context& ctx, const FusedLinearParams& p) {
  return FusedLinearDispatch::make_plan(ctx, p);
}

}  // namespace tunableop
