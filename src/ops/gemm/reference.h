// fp64 reference GEMM on host memory: the yardstick every CPU candidate and test is held to.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/framework/elements.h"
#include "tunableop/gemm.h"

namespace tunableop {

// Returns C laid out like the real C (c_span() elements, ld/stride gaps included). Elements
// outside the m x n matrices are copied from c_in when given, else 0. c_in is read only when
// beta != 0 (or for the gaps). p must be valid (with_defaults applied).
std::vector<double> gemm_reference_f64(const GemmParams& p, const void* a, const void* b, const void* c_in);

// Freivalds' check in fp64: compares C * x with alpha * op(A) * (op(B) * x) + beta * C0 * x
// for `vectors` random vectors x per batch; returns the worst relative error
// ||Cx - ref|| / max(||ref||, tiny). O((mk + kn + mn) * vectors) instead of O(mnk).
// c0 may be null when beta == 0. NaN/Inf in C give +inf.
double freivalds_error(const GemmParams& p, const void* a, const void* b, const void* c0, const void* c,
                       int vectors = 2, uint64_t seed = 1234);

// Relative Frobenius error of `c` (dtype) against a reference laid out like C; only the m x n
// matrices are compared; NaN/Inf give +inf.
double relative_error(const GemmParams& p, const void* c, const std::vector<double>& ref);

// Error a correct candidate stays under: grows with eps(dtype) and sqrt(k).
double gemm_tolerance(const GemmParams& p);

}  // namespace tunableop
