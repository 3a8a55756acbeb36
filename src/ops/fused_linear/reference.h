// fp64 reference of FusedLinear on host memory (tests and the tuner's CPU check).
#pragma once

#include <cstdint>
#include <vector>

#include "tunableop/fused_linear.h"

namespace tunableop {

// The output the op is compared by (y for kStore / kArgmax, the residual after the add, or the
// gated product), [tokens, width] as doubles, computed in fp64 with the roundings to dtype the
// kernels make: the normalised input, the projection (before an add or a gate), gate and up.
// `residual` is the residual before the add (kAddResidual only). Buffers the params do not use
// may be null.
std::vector<double> fused_linear_reference_f64(const FusedLinearParams& p, const void* w, const void* input,
                                               const float* x, const void* norm, const float* residual);

// Each token's argmax over its row of y (dtype, host): the first index of the largest value,
// NaN never chosen, 0 when a row has no number (as the CUDA engine's argmax).
std::vector<int32_t> fused_linear_argmax(const FusedLinearParams& p, const void* y);

// Relative Frobenius error a correct candidate stays under: dtype roundings of the output and
// of the intermediates the kernels round, plus summation order over `in` terms.
double fused_linear_tolerance(const FusedLinearParams& p);

}  // namespace tunableop
