// BLIS provider: candidates, correctness against the fp64 reference, thread-state isolation
// (the per-call rntm_t leaves BLIS's and OpenMP's settings alone), and graceful absence.
#include <gtest/gtest.h>

#include <regex>

#include "backends/cpu/blis/blis_library.h"
#include "backends/cpu/blis/register.h"
#include "backends/cpu/providers_test_support.h"

namespace tunableop {
namespace {

class BlisTest : public testing::ProviderTest<BlisLibrary, register_blis> {
 protected:
  BlisTest() : ProviderTest("BLIS", "Gemm_Blis_t") {}
};

TEST_F(BlisTest, RegistersOneCandidatePerDistinctThreadCountAndTheValidator) {
  auto names = testing::names_of(candidates_);
  if (lib_->threading() == "none") {
    EXPECT_EQ(names, std::vector<std::string>{"Gemm_Blis_t1"});
  } else {
    testing::expect_one_name_per_thread_count(names, "Gemm_Blis_t");
  }
  EXPECT_TRUE(registry_.notes().empty());
  testing::expect_one_validator(registry_, "BLIS_VERSION", lib_->version() + " " + lib_->arch());
  EXPECT_TRUE(std::regex_match(lib_->version(), std::regex(R"(\d+\.\d+(\.\d+)?.*)"))) << lib_->version();
}

TEST_F(BlisTest, EveryCandidateMatchesTheReferenceFp32) {
  testing::expect_all_match_reference(candidates_, DType::kF32, 21, 40, 97);
}

TEST_F(BlisTest, EveryCandidateMatchesTheReferenceFp64) {
  testing::expect_all_match_reference(candidates_, DType::kF64, 22, 40, 97);
}

// Sizes past BLIS's small/skinny ("sup") path, where the packed, threaded kernels run.
TEST_F(BlisTest, LargerProblemsMatchTheReference) {
  testing::expect_all_match_reference(candidates_, DType::kF32, 23, 8, 300);
}

TEST_F(BlisTest, BetaZeroNeverReadsNanInC) { testing::expect_beta_zero_never_reads_nan(candidates_); }

TEST_F(BlisTest, KZeroScalesCByBeta) { testing::expect_k_zero_scales_c_by_beta(candidates_.front()); }

TEST_F(BlisTest, UnsupportedDtypesAreANormalAnswer) {
  GemmParams p;
  p.m = p.n = p.k = 8;
  p.dtype = DType::kBF16;
  EXPECT_TRUE(candidates_.front().supports(p).is_unsupported());
}

TEST_F(BlisTest, CandidatesNeverTouchGlobalThreadSettings) {
  testing::expect_thread_settings_kept(*lib_, candidates_, {1, 3}, /*reads_back=*/true);
}

TEST_F(BlisTest, ConcurrentCallsWithDifferentThreadCountsStayCorrect) {
  testing::expect_concurrent_calls_correct(candidates_, 200, /*transpose_b=*/true);
}

TEST_F(BlisTest, CallsLandInBlis) {
  const std::string file = lib_->symbol_file("bli_sgemm_ex");
  EXPECT_NE(file.find("blis"), std::string::npos) << file;
}

TEST(BlisAbsentTest, MissingLibraryRegistersNothingAndLeavesOneNote) {
  testing::expect_missing_library_leaves_one_note(register_blis_from, "/nonexistent/libblis.so.4", "BLIS");
}

TEST(BlisAbsentTest, OpeningSomethingElseIsAClearStatus) {
  testing::expect_opening_something_else_is_clear<BlisLibrary>("/nonexistent/libblis.so.4", "bli_sgemm_ex");
}

}  // namespace
}  // namespace tunableop
