// `tunableop llm --tp N` and `tunableop allreduce` end to end on the CPU (host-thread ranks):
// the tensor-parallel run prints the same greedy ids as one rank, the all-reduce table checks
// every candidate and keeps the op's choice in the results file, and bad input is an error that
// names the option.
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"

namespace tunableop::testing {
namespace {

// The last non-empty line of `text`.
std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}

std::vector<std::string> llm_args(const std::string& tp) {
  return {"llm",
          "--device",
          "cpu",
          "--model",
          "builtin:tiny",
          "--layers",
          "2",
          "--mode",
          "bench",
          "--prompt-ids",
          "3,17,250,9",
          "--max-new-tokens",
          "12",
          "--iterations",
          "1",
          "--warmup",
          "0",
          "--no-tune",
          "--print-ids",
          "--tp",
          tp};
}

TEST(CliTensorParallel, TwoAndFourCpuRanksPrintTheIdsOfOne) {
  CliRunner cli;
  const CliResult one = cli.run(llm_args("1"));
  ASSERT_EQ(one.code, 0) << one.err;
  const std::string ids = last_line(one.out);
  ASSERT_NE(ids.find(','), std::string::npos) << one.out;
  for (const char* tp : {"2", "4"}) {
    const CliResult r = cli.run(llm_args(tp));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(last_line(r.out), ids) << "--tp " << tp << "\n" << r.out;
    EXPECT_NE(r.out.find("tensor parallel over " + std::string(tp) + " ranks"), std::string::npos) << r.out;
  }
}

TEST(CliTensorParallel, ModelsThatDoNotSplitAndBadCountsAreRefusedWithTheReason) {
  CliRunner cli;
  CliResult r = cli.run(llm_args("3"));  // 8 heads over 3 ranks
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("attention heads do not split evenly"), std::string::npos) << r.err;
  r = cli.run(llm_args("9"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--tp"), std::string::npos) << r.err;
}

TEST(CliAllReduce, CpuRanksTableMarksTheTunedChoiceAndKeepsItInTheResultsFile) {
  CliRunner cli;
  const CliResult r = cli.run({"allreduce", "--device", "cpu", "--ranks", "3", "--dtype", "fp32", "--sizes", "4K,40000",
                               "--iterations", "3", "--rounds", "2", "--tune"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("<- chosen (tuned)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  const std::string results = cli.read("results0.csv");
  EXPECT_NE(results.find("AllReduceTunableOp_float_sum,n_1024_ranks_3"), std::string::npos) << results;
  EXPECT_NE(results.find("AllReduceTunableOp_float_sum,n_10000_ranks_3"), std::string::npos) << results;
}

TEST(CliAllReduce, BadSizesDtypesAndGpusAreNamed) {
  CliRunner cli;
  CliResult r = cli.run({"allreduce", "--device", "cpu", "--sizes", "8X"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--sizes"), std::string::npos) << r.err;
  r = cli.run({"allreduce", "--device", "cpu", "--dtype", "int7"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("int7"), std::string::npos) << r.err;
  r = cli.run({"allreduce", "--device", "cuda", "--gpus", "0,x"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--gpus"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tunableop::testing
