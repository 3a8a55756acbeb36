// The `tunableop` command line, run as a subprocess: tune a small untuned file, show results,
// merge (with its lock against a tuner appending to the output), bench a tiny GEMM, and bad
// input answered with a message and an exit code.
#include <gtest/gtest.h>
#include <sys/file.h>

#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "ops/gemm/dispatch.h"
#include "tools/cli_runner.h"
#include "tunableop/gemm.h"

namespace tunableop {
namespace {

using testing::CliRunner;
using testing::entry_lines;

const char* kUntuned =
    "GemmTunableOp_float_NN,nn_8_8_8\n"
    "GemmTunableOp_float_TN,tn_16_4_8\n";

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CliTune, TunesEveryProblemOfAnUntunedFile) {
  CliRunner cli;
  cli.write("untuned.csv", kUntuned);
  auto r = cli.run({"tune", "untuned.csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tuned 2 problems (0 not saved, 0 already tuned, 0 failed, 0 malformed lines skipped)"),
            std::string::npos)
      << r.out;
  std::string results = cli.read("results0.csv");
  EXPECT_EQ(results.rfind("Validator,TUNABLEOP_VERSION,", 0), 0u) << results;
  auto lines = entry_lines(results);
  ASSERT_EQ(lines.size(), 2u) << results;
  EXPECT_EQ(lines[0].rfind("GemmTunableOp_float_NN,nn_8_8_8,", 0), 0u);
  EXPECT_EQ(lines[1].rfind("GemmTunableOp_float_TN,tn_16_4_8,", 0), 0u);
  EXPECT_EQ(entry_lines(cli.read("results0.csv.stats")).size(), 2u);
  // Again: nothing left to tune.
  r = cli.run({"tune", "untuned.csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tuned 0 problems (0 not saved, 2 already tuned"), std::string::npos) << r.out;
}

// --in-context: the file's problems in sequence, tuned against Default; every tuned choice is
// either kept or recorded as Default with a note.
TEST(CliTune, InContextChecksTheRecordedProblemsInSequence) {
  CliRunner cli;
  cli.write("untuned.csv", kUntuned);
  auto r = cli.run({"tune", "untuned.csv", "--in-context"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("In-context check: "), std::string::npos) << r.out;
  std::smatch m;
  if (std::regex_search(r.out, m, std::regex(R"(kept (\d+) of (\d+))")) && m[1] != m[2]) {
    EXPECT_NE(cli.read("results0.csv.stats").find("in-context check"), std::string::npos);
    EXPECT_NE(cli.read("results0.csv").find(",Default,"), std::string::npos);
  }
}

TEST(CliTune, MalformedLinesAreReportedAndTheRestTuned) {
  CliRunner cli;
  cli.write("untuned.csv", std::string("not a problem\n") + kUntuned + "GemmTunableOp_float_NN,nn_x_8_8\n");
  auto r = cli.run({"tune", "untuned.csv"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("skipping malformed line untuned.csv:1: expected OP,PARAMS, found 'not a problem'"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("cannot read GEMM problem 'GemmTunableOp_float_NN,nn_x_8_8'"), std::string::npos) << r.err;
  EXPECT_EQ(entry_lines(cli.read("results0.csv")).size(), 2u);
  EXPECT_NE(cli.run({"tune", "missing.csv"}).code, 0);
}

TEST(CliShow, PrintsValidatorsEntriesStatsAndBadLines) {
  CliRunner cli;
  cli.write("untuned.csv", kUntuned);
  ASSERT_EQ(cli.run({"tune", "untuned.csv"}).code, 0);
  std::ofstream(cli.file("results0.csv"), std::ios::app) << "GemmTunableOp_float_NN,nn_1_1_1,Default\n";
  auto r = cli.run({"show", "results0.csv", "--stats"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("results0.csv: tunableop results, 2 entries"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TUNABLEOP_VERSION"), std::string::npos);
  EXPECT_NE(r.out.find("min_ms"), std::string::npos);
  EXPECT_NE(r.out.find("tn_16_4_8"), std::string::npos);
  EXPECT_NE(r.out.find("1 malformed line (skipped):"), std::string::npos) << r.out;
  const size_t last_line = count(cli.read("results0.csv"), "\n");
  EXPECT_NE(r.out.find("results0.csv:" + std::to_string(last_line) + ": a result line has 4 fields"), std::string::npos)
      << r.out;

  cli.write("torch.csv", "Validator,PT_VERSION,2.5.0\nGemmTunableOp_float_NN,nn_8_8_8,Gemm_Rocblas_4365,0.01\n");
  r = cli.run({"show", "torch.csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("foreign results"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Gemm_Rocblas_4365"), std::string::npos);

  r = cli.run({"show", "absent.csv"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("absent.csv: no such file"), std::string::npos) << r.err;
}

TEST(CliMerge, FasterWinsStatsFollowAndValidatorsMustAgree) {
  CliRunner cli;
  const std::string v = "Validator,TUNABLEOP_VERSION,0.1.0\nValidator,CPU,test cpu\n";
  cli.write("a.csv", v + "Op,p1,A_slow,2\nOp,p2,A_only,1\n");
  cli.write("a.csv.stats", "Op,p1,A_slow,1,2,2,0,5,10\nOp,p2,A_only,0.5,1,1,0,5,10\n");
  cli.write("b.csv", v + "Op,p1,B_fast,1\nOp,p3,B_only,3\n");
  auto r = cli.run({"merge", "a.csv", "b.csv", "-o", "m.csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote m.csv: 3 entries from 2 files (1 duplicate entry resolved by keeping the faster time, "
                       "1 of them from a later file)"),
            std::string::npos)
      << r.out;
  std::string m = cli.read("m.csv");
  EXPECT_EQ(m.rfind(v, 0), 0u) << m;
  EXPECT_EQ(entry_lines(m), (std::vector<std::string>{"Op,p1,B_fast,1", "Op,p2,A_only,1", "Op,p3,B_only,3"}));
  EXPECT_EQ(entry_lines(cli.read("m.csv.stats")), (std::vector<std::string>{"Op,p2,A_only,0.5,1,1,0,5,10"}));

  cli.write("c.csv", "Validator,TUNABLEOP_VERSION,0.1.0\nValidator,CPU,other cpu\nOp,p4,C,1\n");
  r = cli.run({"merge", "m.csv", "c.csv", "-o", "m.csv"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("CPU (m.csv: 'test cpu', c.csv: 'other cpu')"), std::string::npos) << r.err;
  EXPECT_EQ(entry_lines(cli.read("m.csv")).size(), 3u) << "refused: the output is untouched";
  r = cli.run({"merge", "m.csv", "c.csv", "-o", "m.csv", "--force"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(entry_lines(cli.read("m.csv")).size(), 4u) << "the output may be an input";

  EXPECT_EQ(cli.run({"merge", "a.csv", "-o", "x.csv"}).code, 2);
  r = cli.run({"merge", "a.csv", "absent.csv", "-o", "x.csv"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("absent.csv: no such file"), std::string::npos) << r.err;
}

TEST(CliMerge, WaitsForATunerHoldingTheOutputAndTheTunerFollowsTheMergedFile) {
  CliRunner cli;
  cli.write("untuned.csv", kUntuned);
  ASSERT_EQ(cli.run({"tune", "untuned.csv"}).code, 0);  // results0.csv: this machine's validators
  cli.set_env("TUNABLEOP_FILENAME", cli.file("other%d.csv"));
  cli.write("more.csv", "GemmTunableOp_float_NN,nn_4_4_4\n");
  ASSERT_EQ(cli.run({"tune", "more.csv"}).code, 0);  // other0.csv

  // A tuner in this process, using results0.csv.
  Config c = Config::defaults_only();
  ASSERT_TRUE(c.set(Setting::kFilename, cli.file("results%d.csv")).is_ok());
  ASSERT_TRUE(c.set(Setting::kMaxTuningDurationMs, 1.0).is_ok());
  ASSERT_TRUE(c.set(Setting::kMaxWarmupDurationMs, 1.0).is_ok());
  ASSERT_TRUE(c.set(Setting::kRotatingBufferSize, 0).is_ok());
  Context tuner(Device::cpu(), std::move(c));
  ASSERT_TRUE(tuner.load_results().is_ok());

  // While the file is locked (a tuner mid-append), merge waits.
  int fd = ::open(cli.file("results0.csv").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  // other0.csv first: the merged file does not start with the old one's bytes.
  pid_t pid = cli.start({"merge", "other0.csv", "results0.csv", "-o", "results0.csv"});
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "merge finished while the file was locked";
  ::flock(fd, LOCK_UN);
  ::close(fd);
  auto r = cli.wait(pid);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(entry_lines(cli.read("results0.csv")).size(), 3u);

  // The tuner appends its next result to the merged file (a new inode), under one header, and
  // picks up what the merge brought in (read from the new file's start, not the old offset).
  GemmParams p;
  p.m = p.n = p.k = 5;
  auto rep = tune_gemm(tuner, p);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  EXPECT_TRUE(tuner.results().contains("GemmTunableOp_float_NN", "nn_4_4_4"));
  EXPECT_EQ(tuner.results().size(), 4u);
  std::string merged = cli.read("results0.csv");
  EXPECT_EQ(entry_lines(merged).size(), 4u) << merged;
  EXPECT_EQ(count(merged, "Validator,TUNABLEOP_VERSION,"), 1u) << merged;
  EXPECT_NE(merged.find("GemmTunableOp_float_NN,nn_4_4_4,"), std::string::npos);
  EXPECT_NE(merged.find("GemmTunableOp_float_NN,nn_5_5_5,"), std::string::npos);
}

TEST(CliBench, TimesATinyGemmUntunedAndTuned) {
  CliRunner cli;
  auto r = cli.run({"bench", "-m", "8", "-n", "4", "-k", "16", "--iters", "20"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("GEMM GemmTunableOp_float_NN(nn_8_4_16) on cpu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("untuned: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tuned: "), std::string::npos) << r.out;
  // Each side once, then both again as interleaved medians (the comparison a newcomer reads).
  EXPECT_EQ(count(r.out, "iter/s"), 4u) << r.out;
  EXPECT_NE(r.out.find("untuned vs tuned, interleaved"), std::string::npos) << r.out;
  EXPECT_EQ(entry_lines(cli.read("results0.csv")).size(), 1u);

  r = cli.run({"bench", "--dtype", "fp7"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown dtype 'fp7'"), std::string::npos) << r.err;
  r = cli.run({"bench", "-m", "-3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("-m: must be >= 0 (got -3)"), std::string::npos) << r.err;
}

// --clock-trace (the measurement behind sustained timing) on the CPU: the table, its reading of
// the traces, every point in the CSV; no NVML there, so the clock columns say "-".
TEST(CliBench, ClockTraceOfASuiteFile) {
  CliRunner cli;
  cli.write("suite.csv", "tiny,fp32,T,N,16,4,16\n");
  auto r = cli.run({"bench", "--suite-file", cli.file("suite.csv"), "--clock-trace", "20", "--csv", cli.file("t.csv")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("# clock under sustained load"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tiny | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TUNABLEOP_SUSTAINED_MIN_CALL_MS"), std::string::npos) << r.out;
  const std::string csv = cli.read("t.csv");
  EXPECT_EQ(csv.rfind("shape,t_ms,call_ms,sm_mhz,power_w,limited\ntiny,", 0), 0u) << csv;
  EXPECT_EQ(entry_lines(cli.read("results0.csv")).size(), 0u) << "a trace tunes nothing";

  r = cli.run({"bench", "--clock-trace", "20"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--clock-trace needs --suite or --suite-file"), std::string::npos) << r.err;
  r = cli.run({"bench", "--suite", "attention", "--clock-trace", "20"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--clock-trace traces the GEMM suites"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tunableop
