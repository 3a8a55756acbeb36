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

// The fp64 reference of one problem, computed once, against which outputs are checked:
// matches() wants the relative error within scaled_gemm_tolerance(p) (or `tol` when > 0) and
// every ld gap element still 7; error() is relative to max(||ref||, ||terms||), +inf for NaN/Inf.
class ScaledGemmReference {
 public:
  explicit ScaledGemmReference(const HostScaledGemmProblem& prob);
  double error(const std::vector<uint8_t>& c_out) const;
  ::testing::AssertionResult matches(const std::vector<uint8_t>& c_out, double tol = 0) const;

 private:
  ScaledGemmParams p_;
  size_t c_bytes_;
  std::vector<int64_t> cols_;
  std::vector<double> ref_, terms_;
};

// One-off forms of the above.
::testing::AssertionResult matches_reference(const HostScaledGemmProblem& prob, const std::vector<uint8_t>& c_out,
                                             double tol = 0);
double reference_error(const HostScaledGemmProblem& prob, const std::vector<uint8_t>& c_out);

std::string describe(const ScaledGemmParams& p);

}  // namespace tunableop::testing
