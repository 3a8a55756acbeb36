// Attention dispatch internals (as ops/gemm_and_bias/dispatch.h for GemmAndBias).
#pragma once

#include "ops/attention/definition.h"
#include "ops/framework/dispatch.h"
#include "tunableop/attention.h"

namespace tunableop {

using AttentionDispatch = ops::Dispatcher<AttentionOp>;
using AttentionTuningProblem = ops::OpTuningProblem<AttentionOp>;

}  // namespace tunableop
