// The untuned-problems file: deduplicated recording (also across processes) and reading.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "core/results_test_util.h"
#include "tunableop/results.h"

namespace tunableop {
namespace {

using testing::read_text;
using testing::TempDir;
using testing::write_text;

TEST(UntunedFile, RecordsEachProblemOnce) {
  TempDir dir;
  std::string path = dir.file("tunableop_untuned0.csv");
  UntunedFile f(path);
  ASSERT_TRUE(f.record("GemmTunableOp_float_NN", "nn_1_2_3").is_ok());
  ASSERT_TRUE(f.record("GemmTunableOp_float_NN", "nn_1_2_3").is_ok());
  ASSERT_TRUE(f.record("GemmTunableOp_float_TN", "tn_4_5_6").is_ok());
  EXPECT_EQ(read_text(path), "GemmTunableOp_float_NN,nn_1_2_3\nGemmTunableOp_float_TN,tn_4_5_6\n");

  // A new object (a later run) sees what the file already holds.
  UntunedFile g(path);
  ASSERT_TRUE(g.record("GemmTunableOp_float_TN", "tn_4_5_6").is_ok());
  ASSERT_TRUE(g.record("GemmTunableOp_float_NT", "nt_7_8_9").is_ok());
  // And an object that had loaded earlier re-checks under the lock before writing.
  ASSERT_TRUE(f.record("GemmTunableOp_float_NT", "nt_7_8_9").is_ok());
  auto pairs = UntunedFile::read(path);
  ASSERT_TRUE(pairs.is_ok()) << pairs.status().to_string();
  EXPECT_EQ(*pairs, (std::vector<std::pair<std::string, std::string>>{{"GemmTunableOp_float_NN", "nn_1_2_3"},
                                                                      {"GemmTunableOp_float_TN", "tn_4_5_6"},
                                                                      {"GemmTunableOp_float_NT", "nt_7_8_9"}}));
}

TEST(UntunedFile, ReadSkipsBlankLinesAndReportsMalformedOnes) {
  TempDir dir;
  std::string path = dir.file("u.csv");
  write_text(path, "op_a,pa\r\n\n  \nop_b,pb\n");
  auto ok = UntunedFile::read(path);
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].second, "pa");

  write_text(path, "op_a,pa\n\nop_b\n");
  auto bad = UntunedFile::read(path);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kParseError);
  EXPECT_NE(bad.status().message().find(path + ":3"), std::string::npos) << bad.status().message();

  write_text(path, "op_a,pa,extra\n");
  EXPECT_EQ(UntunedFile::read(path).status().code(), StatusCode::kParseError);

  auto missing = UntunedFile::read(dir.file("nope.csv"));
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.csv"), std::string::npos);
}

TEST(UntunedFile, RecordingRepairsAMissingFinalNewlineAndToleratesBadLines) {
  TempDir dir;
  std::string path = dir.file("u.csv");
  write_text(path, "garbage line\nop_a,pa");
  UntunedFile f(path);
  ASSERT_TRUE(f.record("op_a", "pa").is_ok());
  ASSERT_TRUE(f.record("op_b", "pb").is_ok());
  EXPECT_EQ(read_text(path), "garbage line\nop_a,pa\nop_b,pb\n");
}

TEST(UntunedFile, TwoProcessesRecordingTheSameProblemsWriteEachOnce) {
  TempDir dir;
  std::string path = dir.file("u.csv");
  constexpr int kProcs = 4, kKeys = 150;
  int barrier[2];
  ASSERT_EQ(::pipe(barrier), 0);
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(barrier[1]);
      char c;
      (void)::read(barrier[0], &c, 1);
      UntunedFile f(path);
      for (int i = 0; i < kKeys; ++i) {
        // Different orders so that the processes really race for the same keys.
        int k = (p % 2 == 0) ? i : kKeys - 1 - i;
        if (!f.record("GemmTunableOp_float_NN", "nn_" + std::to_string(k)).is_ok()) ::_exit(1);
      }
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  ::close(barrier[0]);
  ::close(barrier[1]);
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::map<std::string, int> counts;
  std::string text = read_text(path);
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl - start);
    start = nl + 1;
    // Whitespace-only lines are page padding (see append_unsplit) and are ignored by readers.
    if (line.find_first_not_of(' ') != std::string::npos) counts[line]++;
  }
  EXPECT_EQ(counts.size(), static_cast<size_t>(kKeys));
  for (const auto& [line, n] : counts) EXPECT_EQ(n, 1) << line;
}

TEST(UntunedFile, UnwritablePathIsAnIoError) {
  TempDir dir;
  UntunedFile f(dir.file("missing_dir/u.csv"));
  Status st = f.record("op", "p");
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find("missing_dir/u.csv"), std::string::npos);
}

}  // namespace
}  // namespace tunableop
