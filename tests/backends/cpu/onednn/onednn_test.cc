// oneDNN provider: the row-major API mapped onto column-major problems, fp32 and bf16 against
// the fp64 reference, OpenMP thread-state restoration, and graceful absence.
#include <gtest/gtest.h>

#include <regex>

#include "backends/cpu/onednn/onednn_library.h"
#include "backends/cpu/onednn/register.h"
#include "backends/cpu/providers_test_support.h"
#include "tunableop/cpu_info.h"

namespace tunableop {
namespace {

class OnednnTest : public testing::ProviderTest<OnednnLibrary, register_onednn> {
 protected:
  OnednnTest() : ProviderTest("oneDNN", "Gemm_Onednn") {}
};

TEST_F(OnednnTest, RegistersOneCandidatePerDistinctThreadCountAndTheValidator) {
  if (lib_->cpu_runtime() == "omp") {
    testing::expect_one_name_per_thread_count(testing::names_of(candidates_), "Gemm_Onednn_t");
    EXPECT_TRUE(registry_.notes().empty());
  }
  testing::expect_one_validator(registry_, "ONEDNN_VERSION", lib_->version() + " " + lib_->isa());
  EXPECT_TRUE(std::regex_match(lib_->version(), std::regex(R"(\d+\.\d+\.\d+)"))) << lib_->version();
}

TEST_F(OnednnTest, EveryCandidateMatchesTheReferenceFp32) {
  testing::expect_all_match_reference(candidates_, DType::kF32, 31, 40, 97);
}

TEST_F(OnednnTest, LargerProblemsMatchTheReference) {
  testing::expect_all_match_reference(candidates_, DType::kF32, 33, 8, 300);
}

TEST_F(OnednnTest, Bf16MatchesTheReferenceWhereTheCpuHasIt) {
  GemmParams p;
  p.m = p.n = p.k = 16;
  p.dtype = DType::kBF16;
  if (!lib_->has_bf16()) {
    EXPECT_TRUE(candidates_.front().supports(p).is_unsupported());
    GTEST_SKIP() << "no native bf16 on this CPU (oneDNN ISA), bf16 reported unsupported";
  }
  testing::expect_all_match_reference(candidates_, DType::kBF16, 34, 40, 97);
}

TEST_F(OnednnTest, Fp64IsUnsupported) {
  GemmParams p;
  p.m = p.n = p.k = 8;
  p.dtype = DType::kF64;
  EXPECT_TRUE(candidates_.front().supports(p).is_unsupported());
}

TEST_F(OnednnTest, BetaZeroNeverReadsNanInC) {
  testing::expect_beta_zero_never_reads_nan(candidates_, DType::kF32);
  if (lib_->has_bf16() && !HasFatalFailure()) testing::expect_beta_zero_never_reads_nan(candidates_, DType::kBF16);
}

TEST_F(OnednnTest, UnusedLeadingDimensionsAreHarmlessAtAnySize) {
  testing::expect_unused_leading_dimensions_are_harmless(candidates_, DType::kF32);
  if (lib_->has_bf16() && !HasFatalFailure())
    testing::expect_unused_leading_dimensions_are_harmless(candidates_, DType::kBF16);
}

// oneDNN rejects K == 0 as an invalid argument; BLAS semantics (C = beta C) are kept.
TEST_F(OnednnTest, KZeroScalesCByBeta) { testing::expect_k_zero_scales_c_by_beta(candidates_.front(), 2); }

// With alpha == 0 and beta == 0 oneDNN left NaN from C (the fuzzer, seed 4); C = beta C is kept.
TEST_F(OnednnTest, AlphaZeroScalesCByBeta) {
  testing::expect_alpha_zero_scales_c_by_beta(candidates_, DType::kF32);
  if (lib_->has_bf16() && !HasFatalFailure()) testing::expect_alpha_zero_scales_c_by_beta(candidates_, DType::kBF16);
}

TEST_F(OnednnTest, OpenmpSettingIsRestoredAfterEveryCandidate) {
  if (lib_->cpu_runtime() != "omp") GTEST_SKIP() << "oneDNN runtime is " << lib_->cpu_runtime();
  GemmParams p;
  p.m = 300, p.n = 200, p.k = 150, p.beta = 1.0;
  auto prob = testing::HostGemmProblem::random(p, 7);
  const int original = lib_->num_threads();
#ifdef _OPENMP
  // The test's OpenMP and oneDNN's are one runtime: the same per-thread value.
  EXPECT_EQ(original, testing::omp_max_threads());
  for (int setting : {1, cpu_core_count() + 1}) {
    omp_set_num_threads(setting);
#else
  for (int setting : {original}) {
#endif
    for (const auto& c : candidates_) {
      Status st;
      testing::run_candidate(c, prob, &st);
      ASSERT_TRUE(st.is_ok());
      EXPECT_EQ(lib_->num_threads(), setting) << "after " << c.name;
#ifdef _OPENMP
      EXPECT_EQ(testing::omp_max_threads(), setting) << "after " << c.name;
#endif
    }
  }
#ifdef _OPENMP
  omp_set_num_threads(original);
#endif
}

TEST_F(OnednnTest, ConcurrentCallsWithDifferentThreadCountsStayCorrect) {
  const int original = lib_->num_threads();
  testing::expect_concurrent_calls_correct(candidates_, 300);
  EXPECT_EQ(lib_->num_threads(), original);
}

TEST_F(OnednnTest, CallsLandInOnednn) {
  const std::string file = lib_->symbol_file("dnnl_sgemm");
  EXPECT_NE(file.find("dnnl"), std::string::npos) << file;
}

TEST(OnednnAbsentTest, MissingLibraryRegistersNothingAndLeavesOneNote) {
  testing::expect_missing_library_leaves_one_note(register_onednn_from, "/nonexistent/libdnnl.so.2", "oneDNN");
}

TEST(OnednnAbsentTest, OpeningSomethingElseIsAClearStatus) {
  testing::expect_opening_something_else_is_clear<OnednnLibrary>("/nonexistent/libdnnl.so.2", "dnnl_sgemm");
}

}  // namespace
}  // namespace tunableop
