// `mpirun -np 3 tunableop tune FILE` on this machine's CPU: the ranks split the problems, rank 0
// merges one results file; a rank that dies after its first problem loses only what it had not
// finished, and the next run picks up every rank's file and tunes only what is still missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/cli_runner.h"

namespace tunableop {
namespace {

using testing::CliResult;
using testing::CliRunner;
using testing::entry_lines;

const char* kUntuned =
    "GemmTunableOp_float_NN,nn_8_8_8\n"
    "GemmTunableOp_float_TN,tn_16_4_8\n"
    "GemmTunableOp_float_NN,nn_16_16_16\n"
    "GemmTunableOp_float_NN,nn_24_8_16\n"
    "GemmTunableOp_float_NT,nt_8_24_8\n";
constexpr size_t kProblems = 5;

std::set<std::string> keys(const std::vector<std::string>& lines) {
  std::set<std::string> k;
  for (const auto& l : lines) k.insert(l.substr(0, l.find(',', l.find(',') + 1)));
  return k;
}

// Three ranks on this machine, as root too (CI runs as root), with a time limit on the job.
CliRunner mpi_runner() {
  CliRunner cli;
  cli.set_launcher({TUNABLEOP_MPIEXEC, "--oversubscribe", "--allow-run-as-root", "--timeout", "120", "-np", "3"});
  cli.set_env("OMPI_ALLOW_RUN_AS_ROOT", "1");
  cli.set_env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  cli.set_env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");  // containers refuse CMA
  cli.write("untuned.csv", kUntuned);
  return cli;
}

std::vector<std::string> rank_files(const CliRunner& cli) {
  std::vector<std::string> out;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(cli.file("untuned.csv")).parent_path()))
    if (e.path().filename().string().find(".rank") != std::string::npos) out.push_back(e.path().filename().string());
  return out;
}

TEST(CliTuneMpi, RanksSplitTheProblemsAndRankZeroMergesOneFile) {
  CliRunner cli = mpi_runner();
  CliResult r = cli.run({"tune", "untuned.csv"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("5 problems in untuned.csv; 0 already tuned"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5 to tune on 3 ranks"), std::string::npos) << r.out;
  // Every rank had a share (5 problems, round robin: 2, 2, 1).
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(r.out.find("mpi rank " + std::to_string(rank) + "/3"), std::string::npos) << r.out;
  auto lines = entry_lines(cli.read("results0.csv"));
  EXPECT_EQ(lines.size(), kProblems) << cli.read("results0.csv");
  EXPECT_EQ(keys(lines).size(), kProblems);
  EXPECT_EQ(cli.read("results0.csv").rfind("Validator,TUNABLEOP_VERSION,", 0), 0u);
  EXPECT_EQ(entry_lines(cli.read("results0.csv.stats")).size(), kProblems);
  EXPECT_TRUE(rank_files(cli).empty()) << "rank files are removed once merged";
  // Again: nothing left to tune, the file unchanged.
  const std::string before = cli.read("results0.csv");
  r = cli.run({"tune", "untuned.csv"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("5 already tuned"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 to tune on 3 ranks"), std::string::npos) << r.out;
  EXPECT_EQ(cli.read("results0.csv"), before);
}

TEST(CliTuneMpi, AKilledRankLosesOnlyItsUnfinishedProblemsAndARerunTunesTheRest) {
  CliRunner cli = mpi_runner();
  // Rank 1 leaves after its first problem (a crash, as far as the job can tell): mpirun ends
  // the job, so rank 0 never merges.
  CliResult r = cli.run({"tune", "untuned.csv", "--test-exit-rank", "1", "--test-exit-after", "1"});
  EXPECT_NE(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("test hook: leaving after 1 problems"), std::string::npos) << r.err;
  // What every rank finished is in its own file.
  auto ranks = rank_files(cli);
  std::set<std::string> finished;
  for (const auto& f : ranks) {
    if (f.find(".stats") != std::string::npos) continue;
    for (const auto& k : keys(entry_lines(cli.read(f)))) EXPECT_TRUE(finished.insert(k).second) << k;
  }
  EXPECT_EQ(keys(entry_lines(cli.read("results0.rank1.csv"))).size(), 1u) << "rank 1 kept its one result";
  ASSERT_GE(finished.size(), 1u);
  ASSERT_LT(finished.size(), kProblems);

  // The rerun first takes every rank file into the results file, then tunes only the rest.
  r = cli.run({"tune", "untuned.csv"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string want = "5 problems in untuned.csv; " + std::to_string(finished.size()) + " already tuned (" +
                           std::to_string(finished.size()) + " results picked up from rank files of an earlier run); " +
                           std::to_string(kProblems - finished.size()) + " to tune on 3 ranks";
  EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  std::smatch m;
  size_t tuned = 0;
  for (std::string out = r.out; std::regex_search(out, m, std::regex(R"(cpu: tuned (\d+) problems)")); out = m.suffix())
    tuned += std::stoul(m[1]);
  EXPECT_EQ(tuned, kProblems - finished.size()) << r.out;
  auto lines = entry_lines(cli.read("results0.csv"));
  EXPECT_EQ(lines.size(), kProblems) << cli.read("results0.csv");
  EXPECT_EQ(keys(lines).size(), kProblems);
  for (const auto& k : finished) EXPECT_TRUE(keys(lines).count(k)) << k;
  EXPECT_TRUE(rank_files(cli).empty());
}

// Issue 33: OpenMPI binds each rank to a core, and the results said "1 cores": a plain process
// (which sees every core) found them foreign and re-tuned everything into an .env- sibling. Ranks
// tune unbound now, so a plain run uses what they tuned.
TEST(CliTuneMpi, ResultsOfBoundRanksServeAPlainProcess) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "binding to one core changes nothing on one core";
  CliRunner cli = mpi_runner();
  cli.set_launcher({TUNABLEOP_MPIEXEC, "--allow-run-as-root", "--timeout", "120", "-np", "2", "--bind-to", "core"});
  CliResult r = cli.run({"tune", "untuned.csv"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  cli.set_launcher({});
  r = cli.run({"tune", "untuned.csv"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("tuned 0 problems (0 not saved, 5 already tuned"), std::string::npos) << r.out << r.err;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(cli.file("untuned.csv")).parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".env-"), std::string::npos) << e.path();
}

// Issue 33: rank files an interrupted run left at a larger -np were never read again.
TEST(CliTuneMpi, RankFilesOfALargerEarlierRunAreMerged) {
  CliRunner cli = mpi_runner();
  // What rank 7 of an earlier 8-rank run left: one result, in this environment.
  cli.write("one.csv", "GemmTunableOp_float_NN,nn_8_8_8\n");
  cli.set_env("TUNABLEOP_FILENAME", cli.file("results%d.rank7.csv"));
  cli.set_launcher({});
  ASSERT_EQ(cli.run({"tune", "one.csv"}).code, 0);
  ASSERT_EQ(entry_lines(cli.read("results0.rank7.csv")).size(), 1u);
  cli.set_env("TUNABLEOP_FILENAME", cli.file("results%d.csv"));
  cli.set_launcher({TUNABLEOP_MPIEXEC, "--oversubscribe", "--allow-run-as-root", "--timeout", "120", "-np", "3"});
  CliResult r = cli.run({"tune", "untuned.csv"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 already tuned (1 results picked up from rank files of an earlier run); 4 to tune"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(entry_lines(cli.read("results0.csv")).size(), kProblems);
  EXPECT_TRUE(rank_files(cli).empty()) << "the leftover is removed once merged";
}

// Issue 33: a results file name that is not UTF-8 made the ranks' message (JSON text) throw after
// the tuning: exit 3, and the rank files left behind failed every later run the same way.
TEST(CliTuneMpi, AResultsFileNameThatIsNotUtf8Works) {
  CliRunner cli = mpi_runner();
  cli.set_env("TUNABLEOP_FILENAME", cli.file("r\xff\xfe%d.csv"));
  CliResult r = cli.run({"tune", "untuned.csv"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(entry_lines(cli.read("r\xff\xfe"
                                 "0.csv"))
                .size(),
            kProblems);
  EXPECT_TRUE(rank_files(cli).empty());
}

TEST(CliTuneMpi, AMissingUntunedFileFailsEveryRankWithAMessage) {
  CliRunner cli = mpi_runner();
  CliResult r = cli.run({"tune", "missing.csv"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("missing.csv"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tunableop
