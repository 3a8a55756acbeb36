// Issue 10's promise end to end: `tunableop llm --compare` on the built-in model (CPU) tunes in
// its warm-up, runs the in-context check, then times untuned and tuned alternately in one
// process. Tuned may not lose by more than 5%: a ratio measured in one run, so that the
// machine's noise (a shared 2-core VM) mostly cancels; the strict target (>= 0.98x) is a
// benchmark figure (docs/results/tuning), not this test's.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace tunableop {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class LlmInContext : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tunableop-llm-in-context-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Runs `tunableop llm ARGS` with a fresh results file; returns the exit status.
  int llm(const std::string& args, std::string* out, std::string* err) {
    const std::string o = (dir_ / "out.txt").string(), e = (dir_ / "err.txt").string();
    const std::string cmd = "TUNABLEOP_FILENAME='" + (dir_ / "results%d.csv").string() + "' " + TUNABLEOP_CLI +
                            " llm " + args + " >" + o + " 2>" + e;
    const int status = std::system(cmd.c_str());
    *out = slurp(o);
    *err = slurp(e);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  }
  fs::path dir_;
};

TEST_F(LlmInContext, TunedLosesAtMostFivePercentInOneRun) {
  // Up to three runs (the first tunes, the others reuse its file and check again): a tuned set
  // that really loses loses in every run, while another process's burst on a shared machine
  // rarely hits three in a row. Each run's figure is the median of its paired ratios (untuned
  // and tuned back to back), so one disturbed run moves one ratio, not the figure.
  std::string log;
  double best = 0;
  for (int attempt = 0; attempt < 3 && best < 0.95; ++attempt) {
    std::string out, err;
    ASSERT_EQ(llm("--compare --json --total-tokens 64 --iterations 7 --warmup 1", &out, &err), 0) << err;
    auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << out;
    ASSERT_TRUE(j.contains("speedup_paired_median")) << out;
    // The check ran and said what it kept.
    ASSERT_TRUE(j.contains("in_context")) << out;
    const auto& c = j["in_context"];
    EXPECT_LE(c["kept"].get<int>(), c["choices"].get<int>());
    // With no non-Default choice kept, the tuned side runs exactly the untuned solutions (only
    // the lookup differs, well under a percent): whatever ratio was timed is the machine's noise,
    // and the promise holds by construction. CI saw one such run read 0.84x.
    const bool same_solutions = c["kept"].get<int>() == 0;
    best = std::max(best, same_solutions ? 1.0 : j["speedup_paired_median"].get<double>());
    log += "run " + std::to_string(attempt + 1) + ": paired " +
           std::to_string(j["speedup_paired_median"].get<double>()) + ", totals " +
           std::to_string(j["speedup"].get<double>()) + ", in_context " + c.dump() +
           (same_solutions ? " (same solutions as untuned)" : "") + "\n";
    // A dropped choice is recorded as Default with a note in the sidecar.
    if (c["kept"].get<int>() < c["choices"].get<int>()) {
      const std::string stats = slurp((dir_ / "results0.csv.stats").string());
      EXPECT_NE(stats.find("in-context check"), std::string::npos) << stats;
    }
  }
  EXPECT_GE(best, 0.95) << "tuned lost by more than 5% in every run:\n" << log;
}

TEST_F(LlmInContext, TextOutputSaysHowManyChoicesWereKept) {
  std::string out, err;
  ASSERT_EQ(llm("--compare --total-tokens 16 --iterations 1 --warmup 1", &out, &err), 0) << err;
  EXPECT_NE(out.find("In-context check: "), std::string::npos) << out;
  // Skipped on request.
  ASSERT_EQ(llm("--compare --total-tokens 16 --iterations 1 --warmup 1 --no-in-context-check", &out, &err), 0) << err;
  EXPECT_EQ(out.find("In-context check: "), std::string::npos) << out;
}

// After a tuned benchmark, --profile-prefill also lists what the results serve for each prefill
// problem and its tuned time as a rate (issue 12: which candidates the tuned prefill runs).
TEST_F(LlmInContext, PrefillProfileListsTheServedSolutions) {
  std::string out, err;
  ASSERT_EQ(llm("--compare --total-tokens 16 --iterations 1 --warmup 1 --profile-prefill 1", &out, &err), 0) << err;
  const size_t at = out.find("Prefill problems as the results serve them:");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_NE(out.find("GemmTunableOp_float_TN tn_", at), std::string::npos) << out;
  EXPECT_NE(out.find("TFLOP/s", at), std::string::npos) << out;
}

}  // namespace
}  // namespace tunableop
