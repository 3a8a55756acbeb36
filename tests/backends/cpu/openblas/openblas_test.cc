// OpenBLAS provider: candidates, correctness against the fp64 reference, thread-state
// restoration, concurrent use, and graceful absence.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <regex>
#include <set>
#include <thread>

#include "backends/cpu/openblas/openblas_library.h"
#include "backends/cpu/openblas/register.h"
#include "backends/cpu/providers_test_support.h"
#include "core/cpu_info.h"

namespace tunableop {
namespace {

using testing::candidates_with_prefix;

class OpenblasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = OpenblasLibrary::open_first(OpenblasLibrary::default_paths());
    if (!opened.is_ok()) GTEST_SKIP() << "OpenBLAS not loadable here: " << opened.status().to_string();
    lib_ = *opened;
    register_openblas(registry_);
    candidates_ = candidates_with_prefix(registry_, "Gemm_Openblas_t");
  }
  const GemmCandidate& candidate(int threads) {
    for (const auto& c : candidates_)
      if (c.name == "Gemm_Openblas_t" + std::to_string(threads)) return c;
    ADD_FAILURE() << "no Gemm_Openblas_t" << threads;
    return candidates_.front();
  }
  std::shared_ptr<OpenblasLibrary> lib_;
  Registry registry_;
  std::vector<GemmCandidate> candidates_;
};

TEST_F(OpenblasTest, RegistersOneCandidatePerDistinctThreadCountAndTheValidator) {
  const int cores = cpu_core_count();
  std::set<std::string> expected = {"Gemm_Openblas_t1", "Gemm_Openblas_t" + std::to_string(std::max(1, cores / 2)),
                                    "Gemm_Openblas_t" + std::to_string(cores)};
  auto names = testing::names_of(candidates_);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
  EXPECT_EQ(names.size(), expected.size()) << "duplicate thread counts must be merged";
  EXPECT_TRUE(registry_.notes().empty());
  ASSERT_EQ(registry_.validators().size(), 1u);
  EXPECT_EQ(registry_.validators()[0].key, "OPENBLAS_VERSION");
  EXPECT_EQ(registry_.validators()[0].value(), lib_->version() + " " + lib_->core_name());
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

TEST_F(OpenblasTest, BetaZeroNeverReadsNanInC) {
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'})
      for (int64_t size : {1, 8, 67, 256}) {
        GemmParams p;
        p.transa = ta, p.transb = tb, p.m = size, p.n = size + 3, p.k = size + 1, p.beta = 0.0;
        auto prob = testing::HostGemmProblem::random(p, 5);  // C holds NaN
        for (const auto& c : candidates_) {
          Status st;
          auto out = testing::run_candidate(c, prob, &st);
          ASSERT_TRUE(st.is_ok()) << st.to_string();
          EXPECT_TRUE(testing::matches_reference(prob, out)) << c.name;
        }
      }
}

TEST_F(OpenblasTest, KZeroScalesCByBeta) {
  for (double beta : {0.0, 2.0}) {
    GemmParams p;
    p.m = 5, p.n = 4, p.k = 0, p.beta = beta;
    auto prob = testing::HostGemmProblem::random(p, 6);
    Status st;
    auto out = testing::run_candidate(candidates_.front(), prob, &st);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_TRUE(testing::matches_reference(prob, out)) << "beta=" << beta;
  }
}

TEST_F(OpenblasTest, UnsupportedDtypesAreANormalAnswer) {
  GemmParams p;
  p.m = p.n = p.k = 8;
  p.dtype = DType::kBF16;
  EXPECT_TRUE(candidates_.front().supports(p).is_unsupported());
  p.dtype = DType::kF16;
  EXPECT_TRUE(candidates_.front().supports(p).is_unsupported());
}

TEST_F(OpenblasTest, ThreadCountsAreRestoredAfterEveryCandidate) {
  GemmParams p;
  p.m = 300, p.n = 200, p.k = 150, p.beta = 1.0;
  auto prob = testing::HostGemmProblem::random(p, 7);
  const int omp_before = testing::omp_max_threads();
  const int original = lib_->num_threads();
  for (int setting : {1, cpu_core_count()}) {
    lib_->set_num_threads(setting);
    const int before = lib_->num_threads();
    for (const auto& c : candidates_) {
      Status st;
      testing::run_candidate(c, prob, &st);
      ASSERT_TRUE(st.is_ok());
      EXPECT_EQ(lib_->num_threads(), before) << "after " << c.name;
      EXPECT_EQ(testing::omp_max_threads(), omp_before) << "after " << c.name;
    }
  }
  lib_->set_num_threads(original);
}

TEST_F(OpenblasTest, ConcurrentCallsWithDifferentThreadCountsStayCorrect) {
  const int original = lib_->num_threads();
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      GemmParams p;
      p.m = 64 + w, p.n = 48 + w, p.k = 80 - w, p.beta = w % 2 ? 1.0 : 0.0, p.transa = w % 2 ? 'T' : 'N';
      auto prob = testing::HostGemmProblem::random(p, 100 + w);
      for (int i = 0; i < 20; ++i) {
        Status st;
        auto out = testing::run_candidate(candidates_[size_t(i + w) % candidates_.size()], prob, &st);
        if (!st.is_ok() || !testing::matches_reference(prob, out)) ++failures;
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(lib_->num_threads(), original);
}

TEST_F(OpenblasTest, CallsLandInOpenblas) {
  const std::string file = lib_->symbol_file("cblas_sgemm");
  EXPECT_NE(file.find("openblas"), std::string::npos) << file;
  EXPECT_EQ(lib_->symbol_file("openblas_get_config"), file);
}

TEST(OpenblasAbsentTest, MissingLibraryRegistersNothingAndLeavesOneNote) {
  Registry r;
  register_openblas_from(r, {"/nonexistent/libopenblas.so.0"});
  EXPECT_TRUE(r.list<GemmCandidate>().empty());
  EXPECT_TRUE(r.validators().empty());
  ASSERT_EQ(r.notes().size(), 1u);
  EXPECT_NE(r.notes()[0].find("OpenBLAS"), std::string::npos) << r.notes()[0];
  EXPECT_NE(r.notes()[0].find("/nonexistent/libopenblas.so.0"), std::string::npos) << r.notes()[0];
}

TEST(OpenblasAbsentTest, OpeningSomethingElseIsAClearStatus) {
  auto missing = OpenblasLibrary::open("/nonexistent/libopenblas.so.0");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto not_openblas = OpenblasLibrary::open("libm.so.6");
  ASSERT_FALSE(not_openblas.is_ok());
  EXPECT_NE(not_openblas.status().message().find("cblas_sgemm"), std::string::npos) << not_openblas.status().message();
}

}  // namespace
}  // namespace tunableop
