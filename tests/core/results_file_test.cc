// ResultsFile in one process: opening, validator mismatch handling, foreign files, appending.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/results_stats.h"
#include "core/results_test_util.h"
#include "tunableop/results.h"

namespace tunableop {
namespace {

using testing::read_text;
using testing::TempDir;
using testing::write_text;

const Validators kEnvA = {
    {"TUNABLEOP_VERSION", "0.1.0"}, {"CPU", "Test CPU avx2 2 cores"}, {"OPENBLAS_VERSION", "0.3.21"}};
const Validators kEnvB = {
    {"TUNABLEOP_VERSION", "0.1.0"}, {"CPU", "Test CPU avx2 2 cores"}, {"OPENBLAS_VERSION", "0.3.26"}};

ResultEntry entry(std::string op, std::string params, std::string solution, double time_ms) {
  ResultEntry e;
  e.op = std::move(op);
  e.params = std::move(params);
  e.solution = std::move(solution);
  e.time_ms = time_ms;
  return e;
}

TEST(ResultsFile, MissingFileIsNotAnErrorAndAppendCreatesIt) {
  TempDir dir;
  std::string path = dir.file("tunableop_results0.csv");
  ResultsFile f(path, kEnvA);
  auto r = f.open();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FALSE(r->existed);
  EXPECT_EQ(r->active_path, path);
  EXPECT_FALSE(std::filesystem::exists(path));  // opening alone never creates a file

  ASSERT_TRUE(f.append(entry("GemmTunableOp_float_NN", "nn_1_2_3", "Default", 0.5)).is_ok());
  ASSERT_TRUE(f.append(entry("GemmTunableOp_float_NN", "nn_4_5_6", "Gemm_X", 0.25)).is_ok());
  EXPECT_EQ(read_text(path), format_validators(kEnvA) +
                                 "GemmTunableOp_float_NN,nn_1_2_3,Default,0.5\n"
                                 "GemmTunableOp_float_NN,nn_4_5_6,Gemm_X,0.25\n");

  // Already in the file: not written twice, unless replacing a stale entry.
  ASSERT_TRUE(f.append(entry("GemmTunableOp_float_NN", "nn_1_2_3", "Other", 0.1)).is_ok());
  EXPECT_EQ(parse_results(read_text(path), path).entries.size(), 2u);
  EXPECT_EQ(read_text(path).find("Other"), std::string::npos);
  ASSERT_TRUE(f.append(entry("GemmTunableOp_float_NN", "nn_1_2_3", "Retuned", 0.1), /*replace=*/true).is_ok());
  LoadReport after = parse_results(read_text(path), path);
  ASSERT_EQ(after.entries.size(), 2u);
  EXPECT_EQ(after.entries[0].solution, "Retuned");

  ResultsFile again(path, kEnvA);
  auto r2 = again.open();
  ASSERT_TRUE(r2.is_ok());
  EXPECT_TRUE(r2->existed);
  EXPECT_TRUE(r2->ours);
  EXPECT_TRUE(r2->mismatches.empty());
  EXPECT_EQ(r2->entries.size(), 2u);
  EXPECT_EQ(again.path(), path);
}

TEST(ResultsFile, PicksUpWhatOthersAppended) {
  TempDir dir;
  std::string path = dir.file("r.csv");
  ResultsFile a(path, kEnvA), b(path, kEnvA);
  ASSERT_TRUE(a.open().is_ok());
  ASSERT_TRUE(b.open().is_ok());
  ASSERT_TRUE(a.append(entry("op", "p1", "S1", 1)).is_ok());
  ASSERT_TRUE(a.append(entry("op", "p2", "S2", 2)).is_ok());
  std::vector<ResultEntry> picked;
  // b tuned p2 too; a stored it first, so b only picks it up.
  ASSERT_TRUE(b.append(entry("op", "p2", "S2b", 1.5), false, &picked).is_ok());
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_EQ(picked[0].params, "p1");
  EXPECT_EQ(picked[1].solution, "S2");
  picked.clear();
  ASSERT_TRUE(b.append(entry("op", "p3", "S3", 3), false, &picked).is_ok());
  EXPECT_TRUE(picked.empty());
  ASSERT_TRUE(a.append(entry("op", "p4", "S4", 4), false, &picked).is_ok());
  ASSERT_EQ(picked.size(), 1u);
  EXPECT_EQ(picked[0].params, "p3");

  std::string text = read_text(path);
  LoadReport r = parse_results(text, path);
  EXPECT_TRUE(r.malformed.empty());
  EXPECT_EQ(r.entries.size(), 4u);
  EXPECT_EQ(text.find("S2b"), std::string::npos);
}

TEST(ResultsFile, EmptyExistingFileGetsAHeader) {
  TempDir dir;
  std::string path = dir.file("empty.csv");
  write_text(path, "");
  ResultsFile f(path, kEnvA);
  auto r = f.open();
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->existed);
  EXPECT_EQ(f.path(), path);
  ASSERT_TRUE(f.append(entry("op", "p", "S", 1)).is_ok());
  EXPECT_EQ(read_text(path), format_validators(kEnvA) + "op,p,S,1\n");
}

TEST(ResultsFile, MissingFinalNewlineIsRepaired) {
  TempDir dir;
  std::string path = dir.file("r.csv");
  write_text(path, format_validators(kEnvA) + "op,p1,S,1");
  ResultsFile f(path, kEnvA);
  ASSERT_TRUE(f.open().is_ok());
  ASSERT_TRUE(f.append(entry("op", "p2", "S", 2)).is_ok());
  LoadReport r = parse_results(read_text(path), path);
  EXPECT_TRUE(r.malformed.empty());
  EXPECT_EQ(r.entries.size(), 2u);
}

TEST(ResultsFile, ValidatorMismatchKeepsOldFileAndUsesEnvSibling) {
  TempDir dir;
  std::string path = dir.file("tunableop_results0.csv");
  const std::string old_text = format_validators(kEnvA) + "op,p1,Gemm_Old,1\nop,p2,Gemm_Old,2\n";
  write_text(path, old_text);

  ResultsFile f(path, kEnvB);
  auto r = f.open();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->existed);
  EXPECT_TRUE(r->ours);
  ASSERT_EQ(r->mismatches.size(), 1u);
  EXPECT_EQ(r->mismatches[0], "OPENBLAS_VERSION: file '0.3.21' vs now '0.3.26'");
  EXPECT_TRUE(r->entries.empty());  // another environment's tunings are not used
  std::string sibling = dir.file("tunableop_results0.env-" + validators_hash(kEnvB) + ".csv");
  EXPECT_EQ(r->path, path);
  EXPECT_EQ(r->active_path, sibling);
  EXPECT_EQ(f.path(), sibling);
  EXPECT_EQ(f.requested_path(), path);

  ASSERT_TRUE(f.append(entry("op", "p1", "Gemm_New", 0.5)).is_ok());
  EXPECT_EQ(read_text(path), old_text);  // byte for byte
  EXPECT_EQ(read_text(sibling), format_validators(kEnvB) + "op,p1,Gemm_New,0.5\n");

  // A second run in the same environment finds the sibling's entries.
  ResultsFile g(path, kEnvB);
  auto r2 = g.open();
  ASSERT_TRUE(r2.is_ok());
  EXPECT_EQ(g.path(), sibling);
  ASSERT_EQ(r2->entries.size(), 1u);
  EXPECT_EQ(r2->entries[0].solution, "Gemm_New");
  ASSERT_TRUE(g.append(entry("op", "p1", "Gemm_Again", 0.4)).is_ok());  // already there
  ASSERT_TRUE(g.append(entry("op", "p3", "Gemm_New", 0.7)).is_ok());
  EXPECT_EQ(parse_results(read_text(sibling), sibling).entries.size(), 2u);
  EXPECT_EQ(read_text(path), old_text);

  // And the original environment still uses the original file.
  ResultsFile h(path, kEnvA);
  auto r3 = h.open();
  ASSERT_TRUE(r3.is_ok());
  EXPECT_EQ(h.path(), path);
  EXPECT_EQ(r3->entries.size(), 2u);
}

TEST(ResultsFile, KeysOnOneSideOnlyAreMismatches) {
  TempDir dir;
  std::string path = dir.file("r.csv");
  write_text(path, "Validator,TUNABLEOP_VERSION,0.1.0\nValidator,GONE,1\nop,p,S,1\n");
  ResultsFile f(path, {{"TUNABLEOP_VERSION", "0.1.0"}, {"NEW", "2"}});
  auto r = f.open();
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->mismatches,
            (std::vector<std::string>{"GONE: file '1' vs now '<absent>'", "NEW: file '<absent>' vs now '2'"}));
  EXPECT_NE(f.path(), path);
}

TEST(ResultsFile, ForeignFileIsReadButNeverWritten) {
  TempDir dir;
  std::string path = dir.file("tunableop_results0.csv");
  const std::string pytorch =
      "Validator,PT_VERSION,2.4.0\n"
      "Validator,ROCM_VERSION,6.1.0.0-82-5fabb4c\n"
      "Validator,HIPBLASLT_VERSION,0.7.0-1549b021\n"
      "Validator,GCN_ARCH_NAME,gfx942:sramecc+:xnack-\n"
      "Validator,ROCBLAS_VERSION,4.1.0-cefa4a9b-dirty\n"
      "GemmTunableOp_float_NN,nn_1024_512_2048,Gemm_Hipblaslt_NN_52565,0.0653662\n"
      "GemmTunableOp_float_NN,nn_8_8_8,Default,0.001\n";
  write_text(path, pytorch);
  ResultsFile f(path, kEnvA);
  auto r = f.open();
  ASSERT_TRUE(r.is_ok());
  EXPECT_FALSE(r->ours);
  EXPECT_EQ(r->foreign_validators.size(), 5u);
  EXPECT_TRUE(r->mismatches.empty());
  ASSERT_EQ(r->entries.size(), 2u);  // offered; the dispatcher decides which names it knows
  EXPECT_EQ(r->entries[0].solution, "Gemm_Hipblaslt_NN_52565");
  EXPECT_NE(f.path(), path);

  // Our result for a problem PyTorch also tuned goes to the sibling and wins on the next open.
  ASSERT_TRUE(f.append(entry("GemmTunableOp_float_NN", "nn_8_8_8", "Gemm_Own", 0.0005)).is_ok());
  EXPECT_EQ(read_text(path), pytorch);
  ResultsFile g(path, kEnvA);
  auto r2 = g.open();
  ASSERT_TRUE(r2.is_ok());
  ASSERT_EQ(r2->entries.size(), 2u);
  EXPECT_EQ(r2->entries[1].solution, "Gemm_Own");
}

TEST(ResultsFile, AnotherEnvironmentCreatingTheFileMeanwhileDivertsUs) {
  TempDir dir;
  std::string path = dir.file("r.csv");
  ResultsFile a(path, kEnvA), b(path, kEnvB);
  ASSERT_TRUE(a.open().is_ok());
  ASSERT_TRUE(b.open().is_ok());  // both saw no file
  ASSERT_TRUE(a.append(entry("op", "p", "FromA", 1)).is_ok());
  std::vector<ResultEntry> picked;
  ASSERT_TRUE(b.append(entry("op", "p", "FromB", 2), false, &picked).is_ok());
  EXPECT_TRUE(picked.empty());  // A's entries belong to another environment
  EXPECT_EQ(a.path(), path);
  EXPECT_EQ(b.path(), env_sibling_path(path, kEnvB));
  EXPECT_EQ(read_text(path), format_validators(kEnvA) + "op,p,FromA,1\n");
  EXPECT_EQ(read_text(b.path()), format_validators(kEnvB) + "op,p,FromB,2\n");
}

TEST(ResultsFile, StatsGoToTheSidecar) {
  TempDir dir;
  std::string path = dir.file("r.csv");
  ResultsFile f(path, kEnvA);
  ASSERT_TRUE(f.open().is_ok());
  ResultEntry e = entry("op", "p", "S", 0.5);
  e.stats = Measurement{0.4, 0.5, 0.52, 0.03, 20};
  e.tuning_ms = 12;
  ASSERT_TRUE(f.append(e).is_ok());
  ASSERT_TRUE(f.append(entry("op", "q", "S", 0.7)).is_ok());  // no stats: no line
  EXPECT_EQ(read_text(path), format_validators(kEnvA) + "op,p,S,0.5\nop,q,S,0.7\n");
  EXPECT_EQ(read_text(stats_path_for(path)), "op,p,S,0.4,0.5,0.52,0.03,20,12\n");
}

TEST(ResultsFile, LinesNeverStraddleAPageBoundary) {
  // A SIGKILL can stop a write between two pages; a line that starts on a fresh page cannot
  // be torn, so appends that would cross a boundary are preceded by a blank padding line.
  TempDir dir;
  std::string path = dir.file("r.csv");
  std::string text = format_validators(kEnvA);
  for (int i = 0; text.size() < 4096 - 20; ++i) text += "op,filler_" + std::to_string(i) + ",S,1\n";
  write_text(path, text);
  const size_t before = text.size();
  ResultsFile f(path, kEnvA);
  ASSERT_TRUE(f.open().is_ok());
  const std::string line = "GemmTunableOp_float_NN,nn_1024_1024_1024,Gemm_Long_Solution_Name,0.5\n";
  ASSERT_TRUE(f.append(entry("GemmTunableOp_float_NN", "nn_1024_1024_1024", "Gemm_Long_Solution_Name", 0.5)).is_ok());
  std::string after = read_text(path);
  ASSERT_EQ(after.size(), 4096 + line.size());
  EXPECT_EQ(after.substr(4096), line);
  EXPECT_EQ(after.substr(before, 4096 - before), std::string(4096 - before - 1, ' ') + "\n");
  LoadReport r = parse_results(after, path);
  EXPECT_TRUE(r.malformed.empty());
  EXPECT_EQ(r.entries.back().params, "nn_1024_1024_1024");
  // The next append continues normally on the new page, and picks nothing up from the padding.
  std::vector<ResultEntry> picked;
  ASSERT_TRUE(f.append(entry("op", "next", "S", 1), false, &picked).is_ok());
  EXPECT_TRUE(picked.empty());
  EXPECT_EQ(read_text(path).size(), 4096 + line.size() + std::string("op,next,S,1\n").size());
}

TEST(ResultsFile, UnreadablePathIsAnIoErrorNamingIt) {
  TempDir dir;
  std::string d = dir.file("a_directory.csv");
  std::filesystem::create_directories(d);
  ResultsFile f(d, kEnvA);
  auto r = f.open();
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find(d), std::string::npos);
  Status st = f.append(entry("op", "p", "S", 1));
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find(d), std::string::npos);

  if (::geteuid() != 0) {  // root reads anything
    std::string locked = dir.file("locked.csv");
    write_text(locked, format_validators(kEnvA));
    std::filesystem::permissions(locked, std::filesystem::perms::none);
    ResultsFile g(locked, kEnvA);
    auto r2 = g.open();
    ASSERT_FALSE(r2.is_ok());
    EXPECT_EQ(r2.status().code(), StatusCode::kIoError);
    EXPECT_NE(r2.status().message().find(locked), std::string::npos);
  }
  ResultsFile h(dir.file("no/such/dir/r.csv"), kEnvA);
  auto r3 = h.open();
  ASSERT_TRUE(r3.is_ok());
  EXPECT_FALSE(r3->existed);
  Status st3 = h.append(entry("op", "p", "S", 1));
  EXPECT_EQ(st3.code(), StatusCode::kIoError);
  EXPECT_NE(st3.message().find("no/such/dir/r.csv"), std::string::npos);
}

}  // namespace
}  // namespace tunableop
