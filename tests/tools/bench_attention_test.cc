// `tunableop bench --suite attention` on the CPU (tools/bench_attention.cc): the table and the CSV
// carry the graph-replay columns, empty where the device replays no graphs (the CPU), and every
// other column is filled for a tiny decode shape.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli_process.h"
#include "core/results_test_util.h"

namespace tunableop {
namespace {

using testing::CliRun;
using testing::describe;
using testing::read_text;
using testing::run_cli;
using testing::TempDir;

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, sep);) out.push_back(cell);
  return out;
}

TEST(BenchAttention, CpuSuiteLeavesTheGraphColumnsEmpty) {
  TempDir dir;
  CliRun r = run_cli(
      {"bench", "--suite", "attention", "--device", "cpu", "--only", "tiny.decode1024", "--csv", dir.file("suite.csv")},
      {.env = {"TUNABLEOP_FILENAME=" + dir.file("r%d.csv")}, .timeout_s = 300});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("| chosen, graph ms | graph: TFLOP/s or % floor |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tiny.decode1024 |"), std::string::npos) << r.out;

  const std::vector<std::string> lines = split(read_text(dir.file("suite.csv")), '\n');
  ASSERT_EQ(lines.size(), 2u) << read_text(dir.file("suite.csv"));
  const auto header = split(lines[0], ','), row = split(lines[1], ',');
  ASSERT_EQ(header.size(), row.size());
  auto cell = [&](const std::string& name) -> std::string {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return row[i];
    ADD_FAILURE() << "no column " << name << " in " << lines[0];
    return "";
  };
  EXPECT_EQ(cell("shape"), "tiny.decode1024");
  EXPECT_GT(std::stod(cell("tuned_ms")), 0);
  EXPECT_GT(std::stod(cell("pct_kv_floor")), 0);
  EXPECT_EQ(std::stod(cell("graph_ms")), 0);  // no graph replay on the CPU
  EXPECT_EQ(std::stod(cell("graph_pct_kv_floor")), 0);
}

}  // namespace
}  // namespace tunableop
