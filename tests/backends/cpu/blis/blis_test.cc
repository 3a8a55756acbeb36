// BLIS provider: candidates, correctness against the fp64 reference, thread-state isolation
// (the per-call rntm_t leaves BLIS's and OpenMP's settings alone), and graceful absence.
#include <gtest/gtest.h>

#include <atomic>
#include <regex>
#include <set>
#include <thread>

#include "backends/cpu/blis/blis_library.h"
#include "backends/cpu/blis/register.h"
#include "backends/cpu/providers_test_support.h"
#include "core/cpu_info.h"

namespace tunableop {
namespace {

using testing::candidates_with_prefix;

class BlisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = BlisLibrary::open_first(BlisLibrary::default_paths());
    if (!opened.is_ok()) GTEST_SKIP() << "BLIS not loadable here: " << opened.status().to_string();
    lib_ = *opened;
    register_blis(registry_);
    candidates_ = candidates_with_prefix(registry_, "Gemm_Blis_t");
  }
  std::shared_ptr<BlisLibrary> lib_;
  Registry registry_;
  std::vector<GemmCandidate> candidates_;
};

TEST_F(BlisTest, RegistersOneCandidatePerDistinctThreadCountAndTheValidator) {
  auto names = testing::names_of(candidates_);
  if (lib_->threading() == "none") {
    EXPECT_EQ(names, std::vector<std::string>{"Gemm_Blis_t1"});
  } else {
    const int cores = cpu_core_count();
    std::set<std::string> expected = {"Gemm_Blis_t1", "Gemm_Blis_t" + std::to_string(std::max(1, cores / 2)),
                                      "Gemm_Blis_t" + std::to_string(cores)};
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
    EXPECT_EQ(names.size(), expected.size()) << "duplicate thread counts must be merged";
  }
  EXPECT_TRUE(registry_.notes().empty());
  ASSERT_EQ(registry_.validators().size(), 1u);
  EXPECT_EQ(registry_.validators()[0].key, "BLIS_VERSION");
  EXPECT_EQ(registry_.validators()[0].value(), lib_->version() + " " + lib_->arch());
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

TEST_F(BlisTest, BetaZeroNeverReadsNanInC) {
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

TEST_F(BlisTest, KZeroScalesCByBeta) {
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

TEST_F(BlisTest, UnsupportedDtypesAreANormalAnswer) {
  GemmParams p;
  p.m = p.n = p.k = 8;
  p.dtype = DType::kBF16;
  EXPECT_TRUE(candidates_.front().supports(p).is_unsupported());
}

TEST_F(BlisTest, CandidatesNeverTouchGlobalThreadSettings) {
  GemmParams p;
  p.m = 300, p.n = 200, p.k = 150, p.beta = 1.0;
  auto prob = testing::HostGemmProblem::random(p, 7);
  const int omp_before = testing::omp_max_threads();
  const int original = lib_->num_threads();
  for (int setting : {1, 3}) {
    lib_->set_num_threads(setting);
    for (const auto& c : candidates_) {
      Status st;
      testing::run_candidate(c, prob, &st);
      ASSERT_TRUE(st.is_ok());
      EXPECT_EQ(lib_->num_threads(), setting) << "after " << c.name;
      EXPECT_EQ(testing::omp_max_threads(), omp_before) << "after " << c.name;
    }
  }
  lib_->set_num_threads(original);
}

TEST_F(BlisTest, ConcurrentCallsWithDifferentThreadCountsStayCorrect) {
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      GemmParams p;
      p.m = 64 + w, p.n = 48 + w, p.k = 80 - w, p.beta = w % 2 ? 1.0 : 0.0, p.transb = w % 2 ? 'T' : 'N';
      auto prob = testing::HostGemmProblem::random(p, 200 + w);
      for (int i = 0; i < 20; ++i) {
        Status st;
        auto out = testing::run_candidate(candidates_[size_t(i + w) % candidates_.size()], prob, &st);
        if (!st.is_ok() || !testing::matches_reference(prob, out)) ++failures;
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(BlisTest, CallsLandInBlis) {
  const std::string file = lib_->symbol_file("bli_sgemm_ex");
  EXPECT_NE(file.find("blis"), std::string::npos) << file;
}

TEST(BlisAbsentTest, MissingLibraryRegistersNothingAndLeavesOneNote) {
  Registry r;
  register_blis_from(r, {"/nonexistent/libblis.so.4"});
  EXPECT_TRUE(r.list<GemmCandidate>().empty());
  EXPECT_TRUE(r.validators().empty());
  ASSERT_EQ(r.notes().size(), 1u);
  EXPECT_NE(r.notes()[0].find("BLIS"), std::string::npos) << r.notes()[0];
  EXPECT_NE(r.notes()[0].find("/nonexistent/libblis.so.4"), std::string::npos) << r.notes()[0];
}

TEST(BlisAbsentTest, OpeningSomethingElseIsAClearStatus) {
  auto missing = BlisLibrary::open("/nonexistent/libblis.so.4");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto not_blis = BlisLibrary::open("libm.so.6");
  ASSERT_FALSE(not_blis.is_ok());
  EXPECT_NE(not_blis.status().message().find("bli_sgemm_ex"), std::string::npos) << not_blis.status().message();
}

}  // namespace
}  // namespace tunableop
