// GemmAndBias dispatch internals (as ops/gemm/dispatch.h for GEMM).
#pragma once

#include <vector>

#include "ops/framework/dispatch.h"
#include "ops/gemm_and_bias/definition.h"
#include "tunableop/gemm_and_bias.h"

namespace tunableop {

using GemmAndBiasDispatch = ops::Dispatcher<GemmAndBiasOp>;
using GemmAndBiasTuningProblem = ops::OpTuningProblem<GemmAndBiasOp>;

}  // namespace tunableop
