// Shared helpers for GEMM correctness tests: random problems, poisoned outputs, comparison
// with the fp64 reference that also proves nothing outside the m x n matrices was written.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/gemm/reference.h"
#include "tunableop/gemm.h"

namespace tunableop::testing {

// Host buffers for one problem. A, B random in [-1, 1]; C random when beta != 0, NaN otherwise
// (beta == 0 must not read C); every gap element (ld > rows, stride gaps) holds a sentinel.
struct HostGemmProblem {
  GemmParams p;
  std::vector<uint8_t> a, b, c;  // raw bytes of p.dtype
  std::vector<uint8_t> c_initial;
  static HostGemmProblem random(const GemmParams& params, uint64_t seed);
  void reset_c() { c = c_initial; }
};

// A spread of shapes: odd sizes, all transposes, ld > rows, alpha/beta, batches.
std::vector<GemmParams> random_gemm_shapes(DType dtype, uint64_t seed, int count, bool with_batches = true,
                                           int64_t max_dim = 97);

// Checks c_out (bytes of p.dtype) against the fp64 reference within gemm_tolerance(p) (or
// `tol` when > 0), and that gap elements still hold their initial values.
::testing::AssertionResult matches_reference(const HostGemmProblem& prob, const std::vector<uint8_t>& c_out,
                                             double tol = 0);

std::string describe(const GemmParams& p);  // "fp32 NT m=5 n=7 k=3 lda=9 ... alpha=.. beta=.."

}  // namespace tunableop::testing
