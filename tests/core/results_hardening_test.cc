// The results file against hostile or unlucky file systems (issue 9): a FIFO, a directory or a
// huge file where it should be, a FIFO as its .stats sidecar, a full disk, a byte order mark or
// a blank-only file. Never a hang, never a half-written line, never a good file called foreign.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "core/results_stats.h"
#include "core/results_test_util.h"
#include "support/file_faults.h"
#include "tunableop/checked_size.h"
#include "tunableop/results.h"

namespace tunableop {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::TempDir;
using testing::write_text;

const Validators kEnv = {{"TUNABLEOP_VERSION", "0.1.0"}, {"CPU", "Test CPU avx2 2 cores"}};

ResultEntry entry(const std::string& params, bool with_stats = false) {
  ResultEntry e;
  e.op = "GemmTunableOp_float_NN";
  e.params = params;
  e.solution = "Gemm_X";
  e.time_ms = 0.5;
  if (with_stats) e.stats = Measurement{0.4, 0.5, 0.55, 0.01, 12};
  return e;
}

TEST(ResultsHardening, Utf8ByteOrderMarkIsOursNotForeign) {
  TempDir dir;
  const std::string path = dir.file("r.csv");
  write_text(path, "\xEF\xBB\xBF" + format_validators(kEnv) + format_entry(entry("nn_1_1_1")));
  LoadReport r = parse_results(read_text(path), path);
  EXPECT_TRUE(r.ours);
  EXPECT_TRUE(r.malformed.empty());
  ASSERT_EQ(r.entries.size(), 1u);
  ResultsFile f(path, kEnv);
  auto opened = f.open();
  ASSERT_TRUE(opened.is_ok());
  EXPECT_EQ(f.path(), path) << "no .env- sibling for our own file";
  ASSERT_TRUE(f.append(entry("nn_2_2_2")).is_ok());
  EXPECT_EQ(parse_results(read_text(path), path).entries.size(), 2u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

// Found by fuzz/results_file_fuzzer: a byte order mark at the start of a later line (files
// concatenated) became part of the op, and what we wrote back for it read differently.
TEST(ResultsHardening, ByteOrderMarkBeforeAFieldIsBlankAnywhere) {
  const std::string text = format_validators(kEnv) + "\xEF\xBB\xBF" + format_entry(entry("nn_1_1_1")) +
                           " \xEF\xBB\xBF" + "GemmTunableOp_float_NN,\xEF\xBB\xBFnn_2_2_2,Gemm_X,0.5\n";
  LoadReport r = parse_results(text, "r.csv");
  ASSERT_EQ(r.entries.size(), 2u);
  EXPECT_TRUE(r.malformed.empty());
  EXPECT_EQ(r.entries[0].op, "GemmTunableOp_float_NN");
  EXPECT_EQ(r.entries[1].params, "nn_2_2_2");
  for (const auto& e : r.entries) {
    LoadReport again = parse_results(format_entry(e), "again");
    ASSERT_EQ(again.entries.size(), 1u);
    EXPECT_EQ(again.entries[0].op, e.op);
    EXPECT_EQ(again.entries[0].params, e.params);
  }
  EXPECT_EQ(sanitize_field("\xEF\xBB\xBF op"), "op");
}

// Found by fuzz/results_file_fuzzer: an op field of "Validator" (or of nothing) plus carriage
// returns parsed as an entry, and the entry, written back, read as a validator line (or not at all).
// Fields are read as they would be written: "Validator\r\r" is the tag, "\r\r" is empty.
TEST(ResultsHardening, FieldsWithCarriageReturnsReadAsTheyWouldBeWritten) {
  const std::string text = format_validators(kEnv) + "Validator\r\r,TUNABLEOP_X,Gemm_X,0.5\n" +
                           format_entry(entry("nn_1_1_1")) + "\r\r,nn_2_2_2,Gemm_X,0.5\n";
  LoadReport r = parse_results(text, "r.csv");
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.entries[0].params, "nn_1_1_1");
  ASSERT_EQ(r.malformed.size(), 2u);
  EXPECT_NE(r.malformed[0].find("r.csv:3: a Validator line has 3 fields"), std::string::npos) << r.malformed[0];
  EXPECT_NE(r.malformed[1].find("r.csv:5: empty op field"), std::string::npos) << r.malformed[1];
  EXPECT_EQ(r.validators, kEnv);
  for (const auto& e : r.entries) EXPECT_EQ(parse_results(format_entry(e), "again").entries.size(), 1u);
}

TEST(ResultsHardening, BlankOnlyFileIsEmptyNotForeign) {
  for (const std::string blank : {"\n\n", "  \n\t\n", "\r\n", "\xEF\xBB\xBF", "\xEF\xBB\xBF\n \n"}) {
    TempDir dir;
    const std::string path = dir.file("r.csv");
    write_text(path, blank);
    ResultsFile f(path, kEnv);
    auto opened = f.open();
    ASSERT_TRUE(opened.is_ok());
    EXPECT_EQ(f.path(), path);
    ASSERT_TRUE(f.append(entry("nn_3_3_3")).is_ok());
    EXPECT_EQ(f.path(), path) << "appended into the blank file itself";
    LoadReport r = parse_results(read_text(path), path);
    EXPECT_TRUE(r.ours);
    EXPECT_EQ(r.validators, kEnv);
    EXPECT_EQ(r.entries.size(), 1u);
    EXPECT_TRUE(r.malformed.empty());
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
  }
}

TEST(ResultsHardening, FifoAsResultsFileIsAnErrorNotAHang) {
  TempDir dir;
  const std::string path = dir.file("r.csv");
  ASSERT_TRUE(testing::make_fifo(path));
  auto t0 = std::chrono::steady_clock::now();
  ResultsFile f(path, kEnv);
  auto opened = f.open();
  ASSERT_FALSE(opened.is_ok());
  EXPECT_NE(opened.status().message().find("is a FIFO, not a regular file"), std::string::npos);
  Status st = f.append(entry("nn_1_1_1"));
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("is a FIFO"), std::string::npos) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_TRUE(fs::is_fifo(path));
}

TEST(ResultsHardening, FifoStatsSidecarFailsFastAndReleasesTheLock) {
  TempDir dir;
  const std::string path = dir.file("r.csv");
  ASSERT_TRUE(testing::make_fifo(stats_path_for(path)));
  ResultsFile f(path, kEnv);
  ASSERT_TRUE(f.open().is_ok());
  Status st = f.append(entry("nn_1_1_1", /*with_stats=*/true));
  ASSERT_FALSE(st.is_ok()) << "the statistics were not written: say so";
  EXPECT_NE(st.message().find("is a FIFO"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("the result itself was saved to " + path), std::string::npos) << st.message();
  // The result line is there, and the lock is free: another writer gets through at once.
  EXPECT_EQ(parse_results(read_text(path), path).entries.size(), 1u);
  ResultsFile other(path, kEnv);
  ASSERT_TRUE(other.open().is_ok());
  EXPECT_TRUE(other.append(entry("nn_2_2_2")).is_ok());
}

TEST(ResultsHardening, DirectoryAsResultsFileIsNamed) {
  TempDir dir;
  const std::string path = dir.file("r.csv");
  fs::create_directories(path);
  ResultsFile f(path, kEnv);
  auto opened = f.open();
  ASSERT_FALSE(opened.is_ok());
  EXPECT_NE(opened.status().message().find("is a directory"), std::string::npos) << opened.status().message();
  EXPECT_FALSE(f.append(entry("nn_1_1_1")).is_ok());
}

TEST(ResultsHardening, HugeResultsFileIsRefusedNotAllocated) {
  TempDir dir;
  const std::string path = dir.file("r.csv");
  write_text(path, format_validators(kEnv));
  ASSERT_EQ(::truncate(path.c_str(), off_t(host_memory_bytes() / 2)), 0);  // sparse
  ResultsFile f(path, kEnv);
  auto opened = f.open();
  ASSERT_FALSE(opened.is_ok());
  EXPECT_NE(opened.status().message().find("is too large to read"), std::string::npos) << opened.status().message();
}

// A full disk in the middle of a line: the partial line is cut off again, the file stays whole,
// the error says why, and everything appended before is still there.
TEST(ResultsHardening, FullDiskNeverLeavesAPartialLine) {
  TempDir dir;
  const std::string path = dir.file("r.csv");
  ResultsFile f(path, kEnv);
  ASSERT_TRUE(f.open().is_ok());
  ASSERT_TRUE(f.append(entry("nn_1_1_1")).is_ok());
  const std::string before = read_text(path);
  Status st;
  {
    testing::ScopedFileSizeLimit limit(before.size() + 10);  // the next line fits only in part
    st = f.append(entry("nn_22222_22222_22222"));
  }
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find("cannot write"), std::string::npos) << st.message();
  EXPECT_EQ(read_text(path), before) << "the partial line was removed";
  // Space again: the same entry goes in whole.
  ASSERT_TRUE(f.append(entry("nn_22222_22222_22222")).is_ok());
  LoadReport r = parse_results(read_text(path), path);
  EXPECT_EQ(r.entries.size(), 2u);
  EXPECT_TRUE(r.malformed.empty());
}

TEST(ResultsHardening, UntunedFileFifoAndFullDisk) {
  TempDir dir;
  ASSERT_TRUE(testing::make_fifo(dir.file("u.csv")));
  UntunedFile fifo(dir.file("u.csv"));
  EXPECT_NE(fifo.record("op", "p").message().find("is a FIFO"), std::string::npos);
  EXPECT_NE(UntunedFile::read(dir.file("u.csv")).status().message().find("is a FIFO"), std::string::npos);

  UntunedFile u(dir.file("v.csv"));
  ASSERT_TRUE(u.record("GemmTunableOp_float_NN", "nn_1_1_1").is_ok());
  const std::string before = read_text(dir.file("v.csv"));
  {
    testing::ScopedFileSizeLimit limit(before.size() + 5);
    EXPECT_FALSE(u.record("GemmTunableOp_float_NN", "nn_2_2_2").is_ok());
  }
  EXPECT_EQ(read_text(dir.file("v.csv")), before);
}

TEST(ResultsHardening, ProblemListSkipsBomBlankAndValidatorLines) {
  std::vector<std::string> malformed;
  auto list = parse_problem_list(
      "\xEF\xBB\xBFGemmTunableOp_float_NN,nn_1_2_3\n\n  \nValidator,K,V\nbad line\nop,params,Sol,0.5\n"
      "GemmTunableOp_float_NN,nn_1_2_3\n",
      "u.csv", &malformed);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].first, "GemmTunableOp_float_NN") << "the byte order mark is not part of the op";
  EXPECT_EQ(list[1].second, "params");
  ASSERT_EQ(malformed.size(), 1u);
  EXPECT_EQ(malformed[0], "u.csv:5: expected OP,PARAMS, found 'bad line'");
}

}  // namespace
}  // namespace tunableop
