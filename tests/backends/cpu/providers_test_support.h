// Helpers shared by the OpenBLAS, BLIS and oneDNN provider tests: run registered candidates on
// the poisoned random problems of support/gemm_testing.h and compare with the fp64 reference.
#pragma once

#include <gtest/gtest.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cstring>
#include <string>
#include <vector>

#include "ops/gemm/reference.h"
#include "support/gemm_testing.h"
#include "tunableop/gemm.h"
#include "tunableop/registry.h"

namespace tunableop::testing {

inline std::vector<GemmCandidate> candidates_with_prefix(Registry& r, const std::string& prefix) {
  std::vector<GemmCandidate> out;
  for (const auto& c : r.list<GemmCandidate>())
    if (c.name.rfind(prefix, 0) == 0) out.push_back(c);
  return out;
}

inline std::vector<std::string> names_of(const std::vector<GemmCandidate>& cs) {
  std::vector<std::string> names;
  for (const auto& c : cs) names.push_back(c.name);
  return names;
}

// Runs `c` on a copy of prob's initial C (with the workspace it asks for); the output bytes.
inline std::vector<uint8_t> run_candidate(const GemmCandidate& c, const HostGemmProblem& prob, Status* status) {
  std::vector<uint8_t> out = prob.c_initial;
  std::vector<uint8_t> workspace(c.workspace_bytes ? c.workspace_bytes(prob.p) : 0);
  GemmOperands ops;
  ops.a = prob.a.data();
  ops.b = prob.b.data();
  ops.c = out.data();
  ops.workspace = workspace.empty() ? nullptr : workspace.data();
  ops.workspace_bytes = workspace.size();
  *status = c.run(prob.p, ops);
  return out;
}

// matches_reference with the gaps (ld and stride padding) compared byte for byte with their
// initial contents. Needed for bf16: the shared sentinel 12345 rounds to 12352 when stored
// as bf16, so a value comparison against 12345 flags untouched gaps as written.
inline ::testing::AssertionResult matches_reference_exact_gaps(const HostGemmProblem& prob,
                                                               const std::vector<uint8_t>& out) {
  const GemmParams& p = prob.p;
  const size_t es = dtype_size(p.dtype);
  if (out.size() != prob.c_initial.size()) return ::testing::AssertionFailure() << "output size differs";
  for (int64_t i = 0; i < p.c_span(); ++i) {
    const int64_t b = i / p.stride_c, r = i % p.stride_c;
    const bool in_matrix = b < p.batch && r % p.ldc < p.m && r / p.ldc < p.n;
    if (!in_matrix && std::memcmp(out.data() + i * es, prob.c_initial.data() + i * es, es) != 0)
      return ::testing::AssertionFailure() << describe(p) << ": element " << i << " outside C was written";
  }
  auto ref = gemm_reference_f64(p, prob.a.data(), prob.b.data(), prob.c_initial.data());
  const double err = relative_error(p, out.data(), ref), limit = gemm_tolerance(p);
  if (!(err <= limit)) return ::testing::AssertionFailure() << describe(p) << ": relative error " << err << " > " << limit;
  return ::testing::AssertionSuccess();
}

// Every candidate agrees with the fp64 reference on `count` random problems of `dtype` (odd
// sizes, all transposes, ld > rows, alpha/beta with NaN in C when beta == 0, batches).
inline void expect_all_match_reference(const std::vector<GemmCandidate>& cs, DType dtype, uint64_t seed, int count,
                                       int64_t max_dim) {
  ASSERT_FALSE(cs.empty());
  for (const GemmParams& p : random_gemm_shapes(dtype, seed, count, true, max_dim)) {
    HostGemmProblem prob = HostGemmProblem::random(p, seed ^ uint64_t(p.m * 131 + p.n * 17 + p.k));
    for (const auto& c : cs) {
      ASSERT_TRUE(c.supports(prob.p).is_ok()) << c.name << " " << describe(prob.p);
      Status st;
      auto out = run_candidate(c, prob, &st);
      ASSERT_TRUE(st.is_ok()) << c.name << ": " << st.to_string();
      if (dtype == DType::kBF16 || dtype == DType::kF16) {
        EXPECT_TRUE(matches_reference_exact_gaps(prob, out)) << c.name;
      } else {
        EXPECT_TRUE(matches_reference(prob, out)) << c.name;
      }
    }
  }
}

// OpenMP's setting for this thread, which no candidate may change (0 without OpenMP).
inline int omp_max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 0;
#endif
}

}  // namespace tunableop::testing
