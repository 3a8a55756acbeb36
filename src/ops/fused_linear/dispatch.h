// FusedLinear dispatch internals (as ops/gemm/dispatch.h for GEMM).
#pragma once

#include "ops/framework/dispatch.h"
#include "ops/fused_linear/definition.h"
#include "tunableop/fused_linear.h"

namespace tunableop {

using FusedLinearDispatch = ops::Dispatcher<FusedLinearOp>;

}  // namespace tunableop
