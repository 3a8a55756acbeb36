// The `tunableop` binary against hostile files (issue 9): FIFOs, directories, symlinks, devices
// and huge files where results, sidecars, merge outputs or inputs should be, and a full disk.
// Never a hang, never a replaced node or link, never a half-written file; exit codes say when
// results were not saved, and nothing tuned is lost.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "cli_process.h"
#include "core/results_stats.h"
#include "core/results_test_util.h"
#include "support/file_faults.h"
#include "tunableop/checked_size.h"
#include "tunableop/results.h"

namespace tunableop {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::describe;
using testing::read_text;
using testing::run_cli;
using testing::TempDir;
using testing::write_text;

const std::string kProblems = "GemmTunableOp_float_NN,nn_3_3_3\nGemmTunableOp_float_TN,tn_4_3_5\n";

void expect_exit(const CliRun& r, int code, const std::string& message) {
  EXPECT_EQ(r.signal, 0) << describe(r);
  EXPECT_FALSE(r.timed_out) << describe(r);
  EXPECT_EQ(r.exit_code, code) << describe(r);
  EXPECT_NE(r.all().find(message), std::string::npos) << "expected \"" << message << "\"\n" << describe(r);
}

std::string filename_env(const std::string& pattern) { return "TUNABLEOP_FILENAME=" + pattern; }

size_t entry_count(const std::string& path) { return parse_results(read_text(path), path).entries.size(); }

// Two results files to merge, made by the tool itself (so their validators agree).
void make_inputs(const TempDir& dir) {
  write_text(dir.file("u1.csv"), "GemmTunableOp_float_NN,nn_3_3_3\n");
  write_text(dir.file("u2.csv"), "GemmTunableOp_float_NN,nn_5_3_3\n");
  ASSERT_EQ(run_cli({"tune", dir.file("u1.csv")}, {.env = {filename_env(dir.file("a%d.csv"))}}).exit_code, 0);
  ASSERT_EQ(run_cli({"tune", dir.file("u2.csv")}, {.env = {filename_env(dir.file("b%d.csv"))}}).exit_code, 0);
}

TEST(CliFiles, MergeRefusesTargetsThatAreNotRegularFiles) {
  TempDir dir;
  make_inputs(dir);
  write_text(dir.file("precious.csv"), "keep me\n");
  fs::create_symlink(dir.file("precious.csv"), dir.file("link.csv"));
  fs::create_symlink("/dev/null", dir.file("null.csv"));
  ASSERT_TRUE(testing::make_fifo(dir.file("fifo.csv")));
  fs::create_directories(dir.file("dir.csv"));
  const std::pair<const char*, const char*> cases[] = {{"link.csv", "is a symbolic link (to '"},
                                                       {"null.csv", "is a symbolic link (to '/dev/null')"},
                                                       {"fifo.csv", "is a FIFO, not a regular file"},
                                                       {"dir.csv", "is a directory, not a regular file"}};
  for (const auto& [name, why] : cases) {
    CliRun r = run_cli({"merge", dir.file("a0.csv"), dir.file("b0.csv"), "-o", dir.file(name)});
    expect_exit(r, 2, why);
    EXPECT_NE(r.err.find("it is not replaced"), std::string::npos) << describe(r);
  }
  EXPECT_EQ(read_text(dir.file("precious.csv")), "keep me\n");
  EXPECT_TRUE(fs::is_symlink(dir.file("link.csv")));
  EXPECT_TRUE(fs::is_symlink(dir.file("null.csv")));
  EXPECT_TRUE(fs::is_fifo(dir.file("fifo.csv")));
  EXPECT_TRUE(fs::is_directory(dir.file("dir.csv")));
  // The sidecar of the output is replaced too: a FIFO there is refused before anything is written.
  ASSERT_TRUE(testing::make_fifo(dir.file("out.csv.stats")));
  expect_exit(run_cli({"merge", dir.file("a0.csv"), dir.file("b0.csv"), "-o", dir.file("out.csv")}), 2,
              "out.csv.stats: is a FIFO");
  EXPECT_FALSE(fs::exists(dir.file("out.csv")));
  // A regular file or a new path is fine (and the symlink's target can be named directly).
  expect_exit(run_cli({"merge", dir.file("a0.csv"), dir.file("b0.csv"), "-o", dir.file("precious.csv")}), 0, "wrote");
  EXPECT_EQ(entry_count(dir.file("precious.csv")), 2u);
}

TEST(CliFiles, MergeOnAFullDiskLeavesTheOutputAsItWas) {
  TempDir dir;
  make_inputs(dir);
  write_text(dir.file("out.csv"), "old output\n");
  testing::CliOptions o;
  o.file_size_limit = 40;
  CliRun r = run_cli({"merge", dir.file("a0.csv"), dir.file("b0.csv"), "-o", dir.file("out.csv")}, o);
  expect_exit(r, 1, "File too large");
  EXPECT_NE(r.err.find("left unchanged"), std::string::npos) << describe(r);
  EXPECT_EQ(read_text(dir.file("out.csv")), "old output\n");
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << "temporary left: " << e.path();
}

TEST(CliFiles, FifoAsResultsFileIsAnErrorNotAHang) {
  TempDir dir;
  write_text(dir.file("u.csv"), kProblems);
  ASSERT_TRUE(testing::make_fifo(dir.file("r0.csv")));
  testing::CliOptions o{.env = {filename_env(dir.file("r%d.csv"))}, .timeout_s = 60};
  expect_exit(run_cli({"tune", dir.file("u.csv")}, o), 2, "r0.csv: is a FIFO, not a regular file");
  // bench tunes in memory and says at the end that the result was not saved.
  CliRun b = run_cli({"bench", "-m", "8", "-n", "8", "-k", "8", "--iters", "3"}, o);
  expect_exit(b, 1, "1 tuned result not saved");
  expect_exit(run_cli({"show", dir.file("r0.csv")}, o), 2, "is a FIFO");
  expect_exit(run_cli({"tune", dir.file("r0.csv")}), 2, "is a FIFO");  // as the untuned file
  EXPECT_TRUE(fs::is_fifo(dir.file("r0.csv")));
}

TEST(CliFiles, FifoStatsSidecarFailsFastAndTheResultsAreStillSaved) {
  TempDir dir;
  write_text(dir.file("u.csv"), kProblems);
  ASSERT_TRUE(testing::make_fifo(dir.file("r0.csv.stats")));
  CliRun r = run_cli({"tune", dir.file("u.csv")}, {.env = {filename_env(dir.file("r%d.csv"))}, .timeout_s = 60});
  expect_exit(r, 1, "r0.csv.stats: is a FIFO");
  EXPECT_NE(r.err.find("2 results saved without their statistics"), std::string::npos) << describe(r);
  EXPECT_NE(r.out.find("tuned 2 problems (0 not saved"), std::string::npos) << describe(r);
  EXPECT_EQ(entry_count(dir.file("r0.csv")), 2u);
}

TEST(CliFiles, DirectoryAsResultsFileOrNameIsAnError) {
  TempDir dir;
  write_text(dir.file("u.csv"), kProblems);
  fs::create_directories(dir.file("r0.csv"));
  expect_exit(run_cli({"tune", dir.file("u.csv")}, {.env = {filename_env(dir.file("r%d.csv"))}}), 2,
              "r0.csv: is a directory, not a regular file");
  // TUNABLEOP_FILENAME=dir/ used to create dir/0.
  fs::create_directories(dir.file("out"));
  expect_exit(run_cli({"tune", dir.file("u.csv")}, {.env = {filename_env(dir.file("out") + "/")}}), 2,
              "names a directory, not a file");
  EXPECT_TRUE(fs::is_empty(dir.file("out")));
  CliRun b =
      run_cli({"bench", "-m", "8", "-n", "8", "-k", "8", "--iters", "3"}, {.env = {filename_env(dir.file("out/"))}});
  expect_exit(b, 1, "names a directory, not a file");
  // Without "%d" the ordinal is appended: TUNABLEOP_FILENAME=/tmp wrote "/tmp0", =/dev/null a
  // regular file "/dev/null0" inside /dev (issue 33). A name that is a directory or a device is
  // refused as it is.
  expect_exit(run_cli({"tune", dir.file("u.csv")}, {.env = {filename_env(dir.file("out"))}}), 2,
              "names a directory, not a file");
  EXPECT_FALSE(fs::exists(dir.file("out0")));
  expect_exit(run_cli({"tune", dir.file("u.csv")}, {.env = {filename_env("/dev/null")}}), 2,
              "'/dev/null' names a character device, not a regular file");
  EXPECT_FALSE(fs::exists("/dev/null0"));
}

// The "tuned 120 problems (0 failed)" with exit 0 on a full disk: now the count of
// unsaved results, the reason, the lines themselves, exit 1, an intact file, and a rerun that
// tunes only what was lost.
TEST(CliFiles, FullDiskIsReportedAndNothingTunedIsLost) {
  TempDir dir;
  write_text(dir.file("u1.csv"), "GemmTunableOp_float_NN,nn_3_3_3\n");
  const std::string env = filename_env(dir.file("r%d.csv"));
  ASSERT_EQ(run_cli({"tune", dir.file("u1.csv")}, {.env = {env}}).exit_code, 0);
  const std::string before = read_text(dir.file("r0.csv"));
  write_text(dir.file("u.csv"), "GemmTunableOp_float_NN,nn_3_3_3\n" + kProblems.substr(kProblems.find('\n') + 1) +
                                    "GemmTunableOp_float_NN,nn_6_6_6\n");
  testing::CliOptions full{.env = {env}};
  full.file_size_limit = before.size() + 10;
  CliRun r = run_cli({"tune", dir.file("u.csv")}, full);
  expect_exit(r, 1, "tuned 2 problems (2 not saved, 1 already tuned, 0 failed");
  EXPECT_NE(r.err.find("2 tuned results not saved"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("GemmTunableOp_float_TN,tn_4_3_5,"), std::string::npos) << "the lost line is printed";
  EXPECT_NE(r.err.find("GemmTunableOp_float_NN,nn_6_6_6,"), std::string::npos);
  EXPECT_EQ(read_text(dir.file("r0.csv")), before) << "no partial line";
  CliRun again = run_cli({"tune", dir.file("u.csv")}, {.env = {env}});
  expect_exit(again, 0, "tuned 2 problems (0 not saved, 1 already tuned");
  EXPECT_EQ(entry_count(dir.file("r0.csv")), 3u);
}

TEST(CliFiles, ByteOrderMarkAndBlankFilesAreOurs) {
  TempDir dir;
  write_text(dir.file("u.csv"), "\xEF\xBB\xBF" + kProblems);  // the untuned file too
  const std::string env = filename_env(dir.file("r%d.csv"));
  ASSERT_EQ(run_cli({"tune", dir.file("u.csv")}, {.env = {env}}).exit_code, 0);
  EXPECT_EQ(entry_count(dir.file("r0.csv")), 2u);
  write_text(dir.file("r0.csv"), "\xEF\xBB\xBF" + read_text(dir.file("r0.csv")));
  write_text(dir.file("u2.csv"), "GemmTunableOp_float_NN,nn_7_3_3\n");
  CliRun r = run_cli({"tune", dir.file("u2.csv")}, {.env = {env}});
  expect_exit(r, 0, "into " + dir.file("r0.csv"));
  EXPECT_EQ(entry_count(dir.file("r0.csv")), 3u);
  expect_exit(run_cli({"show", dir.file("r0.csv")}), 0, "tunableop results, 3 entries");

  write_text(dir.file("blank0.csv"), "\n  \n\r\n");
  CliRun b = run_cli({"tune", dir.file("u2.csv")}, {.env = {filename_env(dir.file("blank%d.csv"))}});
  expect_exit(b, 0, "into " + dir.file("blank0.csv"));
  expect_exit(run_cli({"show", dir.file("blank0.csv")}), 0, "tunableop results, 1 entry");
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().string().find(".env-"), std::string::npos) << "no sibling: " << e.path();
}

TEST(CliFiles, HugeResultsFileIsRefusedNotRead) {
  TempDir dir;
  write_text(dir.file("r0.csv"), "Validator,TUNABLEOP_VERSION,0.1.0\n");
  ASSERT_EQ(::truncate(dir.file("r0.csv").c_str(), off_t(host_memory_bytes() / 2)), 0);  // sparse
  CliRun s = run_cli({"show", dir.file("r0.csv")});
  expect_exit(s, 2, "is too large to read");
  EXPECT_LT(s.max_rss_kib, 512 * 1024);
  write_text(dir.file("u.csv"), kProblems);
  expect_exit(run_cli({"tune", dir.file("u.csv")}, {.env = {filename_env(dir.file("r%d.csv"))}}), 2,
              "is too large to read");
}

TEST(CliFiles, DevicesAndFifosAsInputsNeverBlock) {
  TempDir dir;
  ASSERT_TRUE(testing::make_fifo(dir.file("fifo")));
  expect_exit(run_cli({"show", "/dev/null"}), 2, "is a character device");
  expect_exit(run_cli({"show", dir.file("fifo")}), 2, "is a FIFO");
  expect_exit(run_cli({"tune", "/dev/zero"}), 2, "is a character device");
  expect_exit(run_cli({"merge", dir.file("fifo"), "/dev/null", "-o", dir.file("o.csv")}), 2, "is a FIFO");
  expect_exit(run_cli({"bench", "--suite-file", dir.file("fifo")}), 2, "is a FIFO");
  expect_exit(run_cli({"llm", "--model", dir.path().string()}), 2, "config.json");
  EXPECT_FALSE(fs::exists(dir.file("o.csv")));
}

}  // namespace
}  // namespace tunableop
