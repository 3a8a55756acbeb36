// OpenBLAS provider: candidates, correctness against the fp64 reference, thread-state
// restoration, concurrent use, and graceful absence.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "backends/cpu/openblas/openblas_library.h"
#include "backends/cpu/openblas/register.h"
#include "backends/cpu/providers_test_support.h"
#include "tunableop/cpu_info.h"

namespace tunableop {
namespace {

class OpenblasTest : public testing::ProviderTest<OpenblasLibrary, register_openblas> {
 protected:
  OpenblasTest() : ProviderTest("OpenBLAS", "Gemm_Openblas_t") {}
  const GemmCandidate& candidate(int threads) {
    for (const auto& c : candidates_)
      if (c.name == "Gemm_Openblas_t" + std::to_string(threads)) return c;
    ADD_FAILURE() << "no Gemm_Openblas_t" << threads;
    return candidates_.front();
  }
};

TEST_F(OpenblasTest, RegistersOneCandidatePerDistinctThreadCountAndTheValidator) {
  testing::expect_one_name_per_thread_count(testing::names_of(candidates_), "Gemm_Openblas_t");
  EXPECT_TRUE(registry_.notes().empty());
  testing::expect_one_validator(registry_, "OPENBLAS_VERSION",
                                lib_->version() + " " + lib_->core_name() + " " + lib_->threading());
  EXPECT_TRUE(std::regex_match(lib_->version(), std::regex(R"(\d+\.\d+\.\d+.*)"))) << lib_->version();
  EXPECT_EQ(lib_->config().rfind("OpenBLAS ", 0), 0u) << lib_->config();
}

TEST_F(OpenblasTest, EveryCandidateMatchesTheReferenceFp32) {
  testing::expect_all_match_reference(candidates_, DType::kF32, 11, 40, 97);
}

TEST_F(OpenblasTest, EveryCandidateMatchesTheReferenceFp64) {
  testing::expect_all_match_reference(candidates_, DType::kF64, 12, 40, 97);
}

// Sizes past OpenBLAS's small-matrix path, where the threaded and beta kernels run.
TEST_F(OpenblasTest, LargerProblemsMatchTheReference) {
  testing::expect_all_match_reference(candidates_, DType::kF32, 13, 8, 300);
}

TEST_F(OpenblasTest, BetaZeroNeverReadsNanInC) { testing::expect_beta_zero_never_reads_nan(candidates_); }

TEST_F(OpenblasTest, UnusedLeadingDimensionsAreHarmlessAtAnySize) {
  testing::expect_unused_leading_dimensions_are_harmless(candidates_);
}

TEST_F(OpenblasTest, KZeroScalesCByBeta) { testing::expect_k_zero_scales_c_by_beta(candidates_.front()); }

TEST_F(OpenblasTest, AlphaZeroScalesCByBeta) { testing::expect_alpha_zero_scales_c_by_beta(candidates_); }

TEST_F(OpenblasTest, UnsupportedDtypesAreANormalAnswer) {
  GemmParams p;
  p.m = p.n = p.k = 8;
  p.dtype = DType::kBF16;
  EXPECT_TRUE(candidates_.front().supports(p).is_unsupported());
  p.dtype = DType::kF16;
  EXPECT_TRUE(candidates_.front().supports(p).is_unsupported());
}

TEST_F(OpenblasTest, ThreadCountsAreRestoredAfterEveryCandidate) {
  // OpenBLAS caps a setting at its MAX_THREADS: the count read back is what must stay.
  testing::expect_thread_settings_kept(*lib_, candidates_, {1, cpu_core_count()}, /*reads_back=*/false);
}

TEST_F(OpenblasTest, ConcurrentCallsWithDifferentThreadCountsStayCorrect) {
  const int original = lib_->num_threads();
  testing::expect_concurrent_calls_correct(candidates_, 100);
  EXPECT_EQ(lib_->num_threads(), original);
}

TEST_F(OpenblasTest, CallsLandInOpenblas) {
  const std::string file = lib_->symbol_file("cblas_sgemm");
  EXPECT_NE(file.find("openblas"), std::string::npos) << file;
  EXPECT_EQ(lib_->symbol_file("openblas_get_config"), file);
}

// One thread world: the OpenMP variant, when installed beside the library the build found, is
// what the provider loads (its threads are libgomp's, shared with our kernels, BLIS, oneDNN).
TEST_F(OpenblasTest, TheInstalledOpenmpVariantIsTheOneLoaded) {
  const char* openmp = "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0";
  if (std::getenv("TUNABLEOP_OPENBLAS_LIBRARY") || !std::filesystem::exists(openmp))
    GTEST_SKIP() << "Debian's OpenMP OpenBLAS (libopenblas0-openmp) is not installed here";
  EXPECT_EQ(lib_->threading(), "openmp") << lib_->path();
  EXPECT_NE(lib_->symbol_file("cblas_sgemm").find("openblas-openmp"), std::string::npos)
      << lib_->symbol_file("cblas_sgemm");
}

TEST(OpenblasPathsTest, TheEnvironmentNamesAVariantFirst) {
  const char* before = std::getenv("TUNABLEOP_OPENBLAS_LIBRARY");
  const std::string saved = before ? before : "";
  ::setenv("TUNABLEOP_OPENBLAS_LIBRARY", "/some/where/libopenblas.so.0", 1);
  auto paths = OpenblasLibrary::default_paths();
  ASSERT_GE(paths.size(), 2u);
  EXPECT_EQ(paths.front(), "/some/where/libopenblas.so.0");
  EXPECT_EQ(paths.back(), "libopenblas.so.0");  // the soname comes last
  if (before)
    ::setenv("TUNABLEOP_OPENBLAS_LIBRARY", saved.c_str(), 1);
  else
    ::unsetenv("TUNABLEOP_OPENBLAS_LIBRARY");
}

TEST(OpenblasAbsentTest, MissingLibraryRegistersNothingAndLeavesOneNote) {
  testing::expect_missing_library_leaves_one_note(register_openblas_from, "/nonexistent/libopenblas.so.0", "OpenBLAS");
}

TEST(OpenblasAbsentTest, OpeningSomethingElseIsAClearStatus) {
  testing::expect_opening_something_else_is_clear<OpenblasLibrary>("/nonexistent/libopenblas.so.0", "cblas_sgemm");
}

}  // namespace
}  // namespace tunableop
