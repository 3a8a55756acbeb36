// BLIS provider: candidates, correctness against the fp64 reference, thread-state isolation
// (the per-call rntm_t leaves BLIS's and OpenMP's settings alone), and graceful absence.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <regex>
#include <stdexcept>
#include <vector>

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

TEST_F(BlisTest, UnusedLeadingDimensionsAreHarmlessAtAnySize) {
  testing::expect_unused_leading_dimensions_are_harmless(candidates_);
}

TEST_F(BlisTest, KZeroScalesCByBeta) { testing::expect_k_zero_scales_c_by_beta(candidates_.front()); }

TEST_F(BlisTest, AlphaZeroScalesCByBeta) { testing::expect_alpha_zero_scales_c_by_beta(candidates_); }

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

// C ends exactly where a PROT_NONE page starts: BLIS 0.9's sgemm reads a few floats past C's
// end when beta != 0 (blis_library.cc), which must not reach the guard page.
class GuardedFloats {
 public:
  explicit GuardedFloats(size_t n) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE)), bytes = n * sizeof(float);
    pages_ = (bytes + page - 1) / page + 1;
    base_ =
        static_cast<char*>(mmap(nullptr, pages_ * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) throw std::runtime_error("mmap");
    mprotect(base_ + (pages_ - 1) * page, page, PROT_NONE);
    data_ = reinterpret_cast<float*>(base_ + (pages_ - 1) * page - bytes);
  }
  ~GuardedFloats() { munmap(base_, pages_ * size_t(sysconf(_SC_PAGESIZE))); }
  float* data() { return data_; }

 private:
  char* base_ = nullptr;
  size_t pages_ = 0;
  float* data_ = nullptr;
};

TEST_F(BlisTest, CEndingAtAnUnmappedPageIsNeverReadPast) {
  struct Shape {
    int64_t m, n, k;
    char tb;
  };
  for (const Shape s : {Shape{30, 16, 30, 'N'}, Shape{2, 1, 1, 'N'}, Shape{31, 7, 5, 'T'}, Shape{30, 1, 30, 'T'}}) {
    GemmParams p;
    p.dtype = DType::kF32;
    p.m = s.m, p.n = s.n, p.k = s.k, p.transb = s.tb;
    p.alpha = 0.5, p.beta = 1.0;
    p = p.with_defaults();
    GuardedFloats a(size_t(p.m * p.k)), b(size_t(p.k * p.n)), c(size_t(p.m * p.n));
    for (int64_t i = 0; i < p.m * p.k; ++i) a.data()[i] = float(i % 7) - 3;
    for (int64_t i = 0; i < p.k * p.n; ++i) b.data()[i] = float(i % 5) - 2;
    for (int64_t i = 0; i < p.m * p.n; ++i) c.data()[i] = float(i % 3);
    std::vector<double> want(size_t(p.m * p.n));
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t i = 0; i < p.m; ++i) {
        double acc = 0;
        for (int64_t l = 0; l < p.k; ++l)
          acc += double(a.data()[i + l * p.lda]) * b.data()[s.tb == 'N' ? l + j * p.ldb : j + l * p.ldb];
        want[size_t(i + j * p.m)] = 0.5 * acc + c.data()[i + j * p.ldc];
      }
    for (const GemmCandidate& cand : candidates_) {
      std::vector<float> c0(c.data(), c.data() + p.m * p.n);
      GemmOperands ops{a.data(), b.data(), c.data(), nullptr, nullptr, 0};
      ASSERT_TRUE(cand.run(p, ops).is_ok()) << cand.name;
      for (int64_t i = 0; i < p.m * p.n; ++i)
        EXPECT_NEAR(c.data()[i], want[size_t(i)], 1e-3) << cand.name << " at " << i;
      std::copy(c0.begin(), c0.end(), c.data());
    }
  }
}

TEST(BlisAbsentTest, MissingLibraryRegistersNothingAndLeavesOneNote) {
  testing::expect_missing_library_leaves_one_note(register_blis_from, "/nonexistent/libblis.so.4", "BLIS");
}

TEST(BlisAbsentTest, OpeningSomethingElseIsAClearStatus) {
  testing::expect_opening_something_else_is_clear<BlisLibrary>("/nonexistent/libblis.so.4", "bli_sgemm_ex");
}

}  // namespace
}  // namespace tunableop
