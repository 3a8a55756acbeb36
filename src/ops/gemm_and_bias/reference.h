// fp64 reference of GemmAndBias on host memory, and the error measures tests and the tuner use.
#pragma once

#include <cstdint>
#include <vector>

#include "tunableop/gemm_and_bias.h"

namespace tunableop {

// act(x) in fp64 (GELU: the tanh approximation).
double apply_activation(Activation act, double x);

// act(alpha * op(A) op(B) + bias) for the columns `cols` of C only: out[c * m + i] is row i of
// column cols[c]. O(m * k * cols.size()). p must be valid (with_defaults applied).
std::vector<double> gemm_and_bias_columns_f64(const GemmAndBiasParams& p, const void* a, const void* b,
                                              const void* bias, const std::vector<int64_t>& cols);

// The whole of C laid out like the real C (c_span() elements); gap elements (ld > m) are copied
// from c_in when given, else 0.
std::vector<double> gemm_and_bias_reference_f64(const GemmAndBiasParams& p, const void* a, const void* b,
                                                const void* bias, const void* c_in);

// Relative Frobenius error of columns `cols` of c (dtype) against gemm_and_bias_columns_f64's
// output; NaN/Inf give +inf.
double gemm_and_bias_columns_error(const GemmAndBiasParams& p, const void* c, const std::vector<int64_t>& cols,
                                   const std::vector<double>& ref);

// Error a correct candidate stays under against the fp64 reference: the GEMM's tolerance,
// doubled for the bias add and activation, which may round once more in the storage type, plus
// 2e-3 for GELU (libraries may use an approximate tanh).
double gemm_and_bias_tolerance(const GemmAndBiasParams& p);

// Host pass used by candidates that run a plain GEMM first: C = act(C + bias) over the m x n
// matrix, computed in fp64 and rounded once to the storage type. C and bias are host memory of
// p.gemm.dtype.
void bias_activation_host(const GemmAndBiasParams& p, void* c, const void* bias);

}  // namespace tunableop
