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
// `term_scale`, when given, receives per element of C the root-sum-square of its terms
// (alpha a_il b_lj over l, and beta c_ij), laid out like C (gaps 0): the scale a correct
// kernel's rounding error is proportional to.
std::vector<double> gemm_reference_f64(const GemmParams& p, const void* a, const void* b, const void* c_in,
                                       std::vector<double>* term_scale = nullptr);

// Freivalds' check in fp64: compares C * x with alpha * op(A) * (op(B) * x) + beta * C0 * x
// for `vectors` random vectors x per batch; returns the worst relative error
// ||Cx - ref|| / max(||ref||, ||terms||, tiny), where ||terms|| is the root-sum-square of the
// products that make up ref: a correct kernel's rounding error scales with the terms, not with
// their sum, which cancellation can make arbitrarily small (a 1 x 1 output with beta != 0 was
// rejected at 2.6e-5 relative to its result). On random data ||terms|| ~ ||ref||, so a wrong
// kernel still shows an O(1) error. O((mk + kn + mn) * vectors) instead of O(mnk).
// c0 may be null when beta == 0. NaN/Inf in C give +inf.
double freivalds_error(const GemmParams& p, const void* a, const void* b, const void* c0, const void* c,
                       int vectors = 2, uint64_t seed = 1234);

// Relative Frobenius error of `c` (dtype) against a reference laid out like C; only the m x n
// matrices are compared; NaN/Inf give +inf.
double relative_error(const GemmParams& p, const void* c, const std::vector<double>& ref);
// The same relative to max(||ref||, ||term_scale||) (gemm_reference_f64's): the measure that
// holds under cancellation, for inputs whose result may be much smaller than its terms.
double relative_error(const GemmParams& p, const void* c, const std::vector<double>& ref,
                      const std::vector<double>& term_scale);

// Error a correct candidate stays under: grows with eps(dtype) and sqrt(k).
double gemm_tolerance(const GemmParams& p);

}  // namespace tunableop
