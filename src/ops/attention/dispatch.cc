// The Attention op's instantiation of the op framework.
#include "ops/attention/dispatch.h"

namespace tunableop {

template class Plan<AttentionOp>;
template class RandomOperands<AttentionOp>;
template struct OpTools<AttentionOp>;

Status attention(Context& ctx, const AttentionParams& p, const AttentionOperands& ops) {
  return AttentionDispatch::call(ctx, p, ops);
}

StatusOr<AttentionPlan> make_plan(Context& ctx, const AttentionParams& p) {
  return AttentionDispatch::make_plan(ctx, p);
}

}  // namespace tunableop
