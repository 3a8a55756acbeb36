// GemmAndBias's instantiation of the op framework.
#include "ops/gemm_and_bias/dispatch.h"

namespace tunableop {

template class Plan<GemmAndBiasOp>;
template class RandomOperands<GemmAndBiasOp>;
template struct OpTools<GemmAndBiasOp>;

Status gemm_and_bias(Context& ctx, const GemmAndBiasParams& p, const GemmAndBiasOperands& ops) {
  return GemmAndBiasDispatch::call(ctx, p, ops);
}

StatusOr<GemmAndBiasPlan> make_plan(Context& ctx, const GemmAndBiasParams& p) {
  return GemmAndBiasDispatch::make_plan(ctx, p);
}

}  // namespace tunableop
