// Shared helpers for ScaledGemm correctness tests (CPU and GPU): random problems on the host,
// outputs poisoned with NaN and ld gaps holding a sentinel, comparison with the fp64 reference
// that also proves nothing outside the m x n matrix was written.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ops/scaled_gemm/reference.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop::testing {

// Host buffers for one problem: A, B uniform in [-1, 1] rounded to their fp8 type, scales in
// [0.25, 2], bias in [-1, 1]; C all NaN in the matrix, a sentinel (7) in the ld gaps.
struct HostScaledGemmProblem {
  ScaledGemmParams p;
  std::vector<uint8_t> a, b, bias, c;
  std::vector<float> scale_a, scale_b;
  static HostScaledGemmProblem random(const ScaledGemmParams& params, uint64_t seed);
  ScaledGemmOperands operands();  // host pointers
  ScaledGemmOperands inputs() const;
};

// Odd sizes, both scale modes, every output and bias type, ld > rows, all transposes, both fp8
// types (e5m2 x e5m2 included: the reference takes it, cuBLASLt does not).
std::vector<ScaledGemmParams> random_scaled_gemm_shapes(uint64_t seed, int count, int64_t max_dim = 67);

// c_out (bytes of p.out_dtype) against the fp64 reference within scaled_gemm_tolerance(p) (or
// `tol` when > 0), and every ld gap element still 7.
::testing::AssertionResult matches_reference(const HostScaledGemmProblem& prob, const std::vector<uint8_t>& c_out,
                                             double tol = 0);
// The error itself (relative to max(||ref||, ||terms||)); +inf for NaN/Inf.
double reference_error(const HostScaledGemmProblem& prob, const std::vector<uint8_t>& c_out);

std::string describe(const ScaledGemmParams& p);

}  // namespace tunableop::testing
