// oneDNN provider: the row-major API mapped onto column-major problems, fp32 and bf16 against
// the fp64 reference, OpenMP thread-state restoration, and graceful absence.
#include <gtest/gtest.h>

#include <atomic>
#include <regex>
#include <set>
#include <thread>

#include "backends/cpu/onednn/onednn_library.h"
#include "backends/cpu/onednn/register.h"
#include "backends/cpu/providers_test_support.h"
#include "core/cpu_info.h"

namespace tunableop {
namespace {

using testing::candidates_with_prefix;

class OnednnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = OnednnLibrary::open_first(OnednnLibrary::default_paths());
    if (!opened.is_ok()) GTEST_SKIP() << "oneDNN not loadable here: " << opened.status().to_string();
    lib_ = *opened;
    register_onednn(registry_);
    candidates_ = candidates_with_prefix(registry_, "Gemm_Onednn");
  }
  std::shared_ptr<OnednnLibrary> lib_;
  Registry registry_;
  std::vector<GemmCandidate> candidates_;
};

TEST_F(OnednnTest, RegistersOneCandidatePerDistinctThreadCountAndTheValidator) {
  auto names = testing::names_of(candidates_);
  if (lib_->cpu_runtime() == "omp") {
    const int cores = cpu_core_count();
    std::set<std::string> expected = {"Gemm_Onednn_t1", "Gemm_Onednn_t" + std::to_string(std::max(1, cores / 2)),
                                      "Gemm_Onednn_t" + std::to_string(cores)};
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
    EXPECT_EQ(names.size(), expected.size()) << "duplicate thread counts must be merged";
    EXPECT_TRUE(registry_.notes().empty());
  }
  ASSERT_EQ(registry_.validators().size(), 1u);
  EXPECT_EQ(registry_.validators()[0].key, "ONEDNN_VERSION");
  EXPECT_EQ(registry_.validators()[0].value(), lib_->version() + " " + lib_->isa());
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
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    if (dtype == DType::kBF16 && !lib_->has_bf16()) continue;
    for (char ta : {'N', 'T'})
      for (char tb : {'N', 'T'})
        for (int64_t size : {1, 8, 67, 256}) {
          GemmParams p;
          p.dtype = dtype, p.transa = ta, p.transb = tb, p.m = size, p.n = size + 3, p.k = size + 1, p.beta = 0.0;
          auto prob = testing::HostGemmProblem::random(p, 5);  // C holds NaN
          for (const auto& c : candidates_) {
            Status st;
            auto out = testing::run_candidate(c, prob, &st);
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            EXPECT_TRUE(testing::matches_reference(prob, out)) << c.name;
          }
        }
  }
}

// oneDNN rejects K == 0 as an invalid argument; BLAS semantics (C = beta C) are kept.
TEST_F(OnednnTest, KZeroScalesCByBeta) {
  for (double beta : {0.0, 2.0}) {
    GemmParams p;
    p.m = 5, p.n = 4, p.k = 0, p.beta = beta, p.batch = 2;
    auto prob = testing::HostGemmProblem::random(p, 6);
    Status st;
    auto out = testing::run_candidate(candidates_.front(), prob, &st);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_TRUE(testing::matches_reference(prob, out)) << "beta=" << beta;
  }
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
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      GemmParams p;
      p.m = 64 + w, p.n = 48 + w, p.k = 80 - w, p.beta = w % 2 ? 1.0 : 0.0, p.transa = w % 2 ? 'T' : 'N';
      auto prob = testing::HostGemmProblem::random(p, 300 + w);
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

TEST_F(OnednnTest, CallsLandInOnednn) {
  const std::string file = lib_->symbol_file("dnnl_sgemm");
  EXPECT_NE(file.find("dnnl"), std::string::npos) << file;
}

TEST(OnednnAbsentTest, MissingLibraryRegistersNothingAndLeavesOneNote) {
  Registry r;
  register_onednn_from(r, {"/nonexistent/libdnnl.so.2"});
  EXPECT_TRUE(r.list<GemmCandidate>().empty());
  EXPECT_TRUE(r.validators().empty());
  ASSERT_EQ(r.notes().size(), 1u);
  EXPECT_NE(r.notes()[0].find("oneDNN"), std::string::npos) << r.notes()[0];
  EXPECT_NE(r.notes()[0].find("/nonexistent/libdnnl.so.2"), std::string::npos) << r.notes()[0];
}

TEST(OnednnAbsentTest, OpeningSomethingElseIsAClearStatus) {
  auto missing = OnednnLibrary::open("/nonexistent/libdnnl.so.2");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto not_onednn = OnednnLibrary::open("libm.so.6");
  ASSERT_FALSE(not_onednn.is_ok());
  EXPECT_NE(not_onednn.status().message().find("dnnl_sgemm"), std::string::npos) << not_onednn.status().message();
}

}  // namespace
}  // namespace tunableop
