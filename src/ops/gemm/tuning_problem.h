// One GEMM problem as the tuner sees it: the framework's tuning problem for GemmOp (rotating
// input copies, the numerics check: Freivalds in fp64 on the CPU, Default's output elsewhere).
#pragma once

#include "ops/framework/tuning_problem.h"
#include "ops/gemm/definition.h"

namespace tunableop {

using GemmTuningProblem = ops::OpTuningProblem<GemmOp>;

}  // namespace tunableop
