// fp64 reference of ScaledGemm on host memory (the dequantized values: fp8 elements as they
// are, times their scales), and the tolerance a correct candidate stays under.
#pragma once

#include <cstdint>
#include <vector>

#include "tunableop/scaled_gemm.h"

namespace tunableop {

// Columns `cols` of C only: out[c * m + i] is row i of column cols[c]. `o` holds host pointers
// (a, b, scale_a, scale_b, bias when p has one). With `term_scale`, it receives per element the
// root-sum-square of the terms that make it up (the k scaled products and the bias): the size a
// correct kernel's accumulation error is proportional to, however much the sum cancels.
// O(m * k * cols.size()). p must be valid (with_defaults applied).
std::vector<double> scaled_gemm_columns_f64(const ScaledGemmParams& p, const ScaledGemmOperands& o,
                                            const std::vector<int64_t>& cols,
                                            std::vector<double>* term_scale = nullptr);

// The whole of C laid out like the real C (c_span() elements, ld gaps 0), and its term scale.
std::vector<double> scaled_gemm_reference_f64(const ScaledGemmParams& p, const ScaledGemmOperands& o,
                                              std::vector<double>* term_scale = nullptr);

// Relative Frobenius error of columns `cols` of c (p.out_dtype, host) against the reference
// columns, relative to max(||ref||, ||term_scale||); NaN/Inf give +inf.
double scaled_gemm_columns_error(const ScaledGemmParams& p, const void* c, const std::vector<int64_t>& cols,
                                 const std::vector<double>& ref, const std::vector<double>& term_scale);

// What a correct candidate's relative error stays under (docs/design.md, "ScaledGemm's
// tolerance"): the output's rounding (2 u_out) plus an allowance for FP8 tensor cores' fast
// accumulation (about 14 bits kept per 32-deep step: 2^-12 sqrt(k / 32)), capped below half the
// error of one more fp8 rounding (u_fp8 / (2 sqrt 3)), so that a kernel that rounds an input,
// an intermediate or a scale to fp8 once more than the problem says fails.
double scaled_gemm_tolerance(const ScaledGemmParams& p);

}  // namespace tunableop
