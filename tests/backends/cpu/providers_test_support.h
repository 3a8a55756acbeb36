// Helpers shared by the OpenBLAS, BLIS and oneDNN provider tests: run registered candidates on
// the poisoned random problems of support/gemm_testing.h and compare with the fp64 reference.
#pragma once

#include <gtest/gtest.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <string>
#include <vector>

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
      EXPECT_TRUE(matches_reference(prob, out)) << c.name;
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
