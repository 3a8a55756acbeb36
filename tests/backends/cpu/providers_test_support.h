// Helpers shared by the OpenBLAS, BLIS and oneDNN provider tests: run registered candidates on
// the poisoned random problems of support/gemm_testing.h and compare with the fp64 reference,
// plus the fixture and the test bodies that the three libraries' tests have in common.
#pragma once

#include <gtest/gtest.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/gemm_testing.h"
#include "tunableop/cpu_info.h"
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

// Fixture for one provider: `Lib` opened from its default paths (the test is skipped when it
// does not load), `Register` run into registry_, and the candidates whose names start with
// `prefix`. A library's fixture derives from it and names the library in its constructor.
template <class Lib, void (*Register)(Registry&)>
class ProviderTest : public ::testing::Test {
 protected:
  ProviderTest(std::string label, std::string prefix) : label_(std::move(label)), prefix_(std::move(prefix)) {}
  void SetUp() override {
    auto opened = Lib::open_first(Lib::default_paths());
    if (!opened.is_ok()) GTEST_SKIP() << label_ << " not loadable here: " << opened.status().to_string();
    lib_ = *opened;
    Register(registry_);
    candidates_ = candidates_with_prefix(registry_, prefix_);
  }
  std::string label_, prefix_;
  std::shared_ptr<Lib> lib_;
  Registry registry_;
  std::vector<GemmCandidate> candidates_;
};

// `names` are exactly PREFIX<1>, PREFIX<half the cores> and PREFIX<all cores>, each once.
inline void expect_one_name_per_thread_count(const std::vector<std::string>& names, const std::string& prefix) {
  const int cores = cpu_core_count();
  std::set<std::string> expected = {prefix + "1", prefix + std::to_string(std::max(1, cores / 2)),
                                    prefix + std::to_string(cores)};
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
  EXPECT_EQ(names.size(), expected.size()) << "duplicate thread counts must be merged";
}

// `r` has one validator, `key`, whose value is `value`.
inline void expect_one_validator(const Registry& r, const std::string& key, const std::string& value) {
  ASSERT_EQ(r.validators().size(), 1u);
  EXPECT_EQ(r.validators()[0].key, key);
  EXPECT_EQ(r.validators()[0].value(), value);
}

// beta == 0 with NaN in C, every transpose pair and sizes from 1 to past the small-matrix
// paths: C is never read.
inline void expect_beta_zero_never_reads_nan(const std::vector<GemmCandidate>& cs, DType dtype = DType::kF32) {
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'})
      for (int64_t size : {1, 8, 67, 256}) {
        GemmParams p;
        p.dtype = dtype, p.transa = ta, p.transb = tb, p.m = size, p.n = size + 3, p.k = size + 1, p.beta = 0.0;
        auto prob = HostGemmProblem::random(p, 5);  // C holds NaN
        for (const auto& c : cs) {
          Status st;
          auto out = run_candidate(c, prob, &st);
          ASSERT_TRUE(st.is_ok()) << st.to_string();
          EXPECT_TRUE(matches_reference(prob, out)) << c.name;
        }
      }
}

// A matrix with one column as stored never steps by its leading dimension, so any ld >= its rows
// is legal there, up to 2^63 - 1; BLIS once faulted on exactly that (n == 1, ldb near 2^63, found
// by fuzz/gemm_params_fuzzer). Every candidate must run such problems and match the reference.
inline void expect_unused_leading_dimensions_are_harmless(const std::vector<GemmCandidate>& cs,
                                                          DType dtype = DType::kF32) {
  // 2^63 - 1, the fuzzer's value (its multiples by 4 and 8 wrap differently), 2^62 and 2^31; the odd
  // ones with beta 0.5 (C is read), the even ones with beta 0 (C holds NaN).
  const int64_t kHuge[] = {std::numeric_limits<int64_t>::max(), 9197374787241092003, int64_t(1) << 62,
                           int64_t(1) << 31};
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape s : {Shape{16, 1, 15}, Shape{1, 16, 15}, Shape{16, 15, 1}, Shape{1, 1, 7}})
    for (char ta : {'N', 'T'})
      for (char tb : {'N', 'T'})
        for (int64_t huge : kHuge) {
          GemmParams p;
          p.dtype = dtype, p.transa = ta, p.transb = tb, p.m = s.m, p.n = s.n, p.k = s.k;
          p.alpha = 0.5, p.beta = huge % 2 ? 0.5 : 0.0;
          if (p.a_cols() == 1) p.lda = huge;
          if (p.b_cols() == 1) p.ldb = huge;
          if (p.n == 1) p.ldc = huge;
          ASSERT_TRUE(p.with_defaults().validate().is_ok()) << describe(p);
          auto prob = HostGemmProblem::random(p, 8);
          for (const auto& c : cs) {
            ASSERT_TRUE(c.supports(prob.p).is_ok()) << c.name << " " << describe(p);
            Status st;
            auto out = run_candidate(c, prob, &st);
            ASSERT_TRUE(st.is_ok()) << c.name << " " << describe(p) << ": " << st.to_string();
            EXPECT_TRUE(matches_reference(prob, out)) << c.name << " " << describe(p);
          }
        }
}

// k == 0 keeps BLAS semantics: C = beta C (beta == 0 writes zeros over NaN).
inline void expect_k_zero_scales_c_by_beta(const GemmCandidate& c, int64_t batch = 1) {
  for (double beta : {0.0, 2.0}) {
    GemmParams p;
    p.m = 5, p.n = 4, p.k = 0, p.beta = beta, p.batch = batch;
    auto prob = HostGemmProblem::random(p, 6);
    Status st;
    auto out = run_candidate(c, prob, &st);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_TRUE(matches_reference(prob, out)) << "beta=" << beta;
  }
}

// alpha == 0 keeps BLAS semantics: C = beta C, and beta == 0 writes zeros over NaN. Among the
// shapes the gemm_params fuzzer's (seed 4): oneDNN left NaN in C there.
inline void expect_alpha_zero_scales_c_by_beta(const std::vector<GemmCandidate>& cs, DType dtype = DType::kF32) {
  struct Case {
    char ta, tb;
    int64_t m, n, k, lda, ldb, ldc, batch;
  };
  for (const Case s : {Case{'T', 'N', 256, 24, 35, 35, 512, 256, 1}, Case{'N', 'N', 7, 5, 3, 7, 3, 9, 2},
                       Case{'N', 'T', 33, 17, 65, 33, 17, 33, 1}})
    for (double beta : {0.0, 0.5}) {
      GemmParams p;
      p.dtype = dtype, p.transa = s.ta, p.transb = s.tb, p.m = s.m, p.n = s.n, p.k = s.k;
      p.lda = s.lda, p.ldb = s.ldb, p.ldc = s.ldc, p.batch = s.batch, p.alpha = 0.0, p.beta = beta;
      ASSERT_TRUE(p.with_defaults().validate().is_ok()) << describe(p);
      auto prob = HostGemmProblem::random(p, 12);
      for (const auto& c : cs) {
        if (!c.supports(prob.p).is_ok()) continue;
        Status st;
        auto out = run_candidate(c, prob, &st);
        ASSERT_TRUE(st.is_ok()) << c.name << " " << describe(p) << ": " << st.to_string();
        EXPECT_TRUE(matches_reference(prob, out)) << c.name << " " << describe(p) << " beta " << beta;
      }
    }
}

// Four threads call the candidates in turn (different thread counts at once), 20 calls each,
// on problems seeded from `seed`; every answer must be right. Odd workers transpose A, or B
// when `transpose_b`.
inline void expect_concurrent_calls_correct(const std::vector<GemmCandidate>& cs, uint64_t seed,
                                            bool transpose_b = false) {
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      GemmParams p;
      p.m = 64 + w, p.n = 48 + w, p.k = 80 - w, p.beta = w % 2 ? 1.0 : 0.0;
      (transpose_b ? p.transb : p.transa) = w % 2 ? 'T' : 'N';
      auto prob = HostGemmProblem::random(p, seed + uint64_t(w));
      for (int i = 0; i < 20; ++i) {
        Status st;
        auto out = run_candidate(cs[size_t(i + w) % cs.size()], prob, &st);
        if (!st.is_ok() || !matches_reference(prob, out)) ++failures;
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// With the library's global thread count set to each of `settings`, running every candidate
// leaves that count and the caller's OpenMP setting as they were; the original count is put
// back at the end. `reads_back` also expects the count read after setting to be the setting
// (a library may cap it instead).
template <class Lib>
void expect_thread_settings_kept(Lib& lib, const std::vector<GemmCandidate>& cs, const std::vector<int>& settings,
                                 bool reads_back) {
  GemmParams p;
  p.m = 300, p.n = 200, p.k = 150, p.beta = 1.0;
  auto prob = HostGemmProblem::random(p, 7);
  const int omp_before = omp_max_threads();
  const int original = lib.num_threads();
  for (int setting : settings) {
    lib.set_num_threads(setting);
    const int before = lib.num_threads();
    if (reads_back) {
      EXPECT_EQ(before, setting);
    }
    for (const auto& c : cs) {
      Status st;
      run_candidate(c, prob, &st);
      ASSERT_TRUE(st.is_ok());
      EXPECT_EQ(lib.num_threads(), before) << "after " << c.name;
      EXPECT_EQ(omp_max_threads(), omp_before) << "after " << c.name;
    }
  }
  lib.set_num_threads(original);
}

// register_from(r, {missing_path}) registers no candidate and no validator, and leaves one note
// naming `label` and the path.
inline void expect_missing_library_leaves_one_note(void (*register_from)(Registry&, const std::vector<std::string>&),
                                                   const std::string& missing_path, const std::string& label) {
  Registry r;
  register_from(r, {missing_path});
  EXPECT_TRUE(r.list<GemmCandidate>().empty());
  EXPECT_TRUE(r.validators().empty());
  ASSERT_EQ(r.notes().size(), 1u);
  EXPECT_NE(r.notes()[0].find(label), std::string::npos) << r.notes()[0];
  EXPECT_NE(r.notes()[0].find(missing_path), std::string::npos) << r.notes()[0];
}

// Lib::open of a missing file is not_found; of another library (libm) an error naming
// `first_symbol`, the first entry point it lacks.
template <class Lib>
void expect_opening_something_else_is_clear(const std::string& missing_path, const std::string& first_symbol) {
  auto missing = Lib::open(missing_path);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto other = Lib::open("libm.so.6");
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find(first_symbol), std::string::npos) << other.status().message();
}

}  // namespace tunableop::testing
