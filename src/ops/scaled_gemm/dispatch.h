// ScaledGemm dispatch internals (as ops/gemm/dispatch.h for GEMM).
#pragma once

#include "ops/framework/dispatch.h"
#include "ops/scaled_gemm/definition.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop {

using ScaledGemmDispatch = ops::Dispatcher<ScaledGemmOp>;
using ScaledGemmTuningProblem = ops::OpTuningProblem<ScaledGemmOp>;

}  // namespace tunableop
