// ScaledGemm lines through the command line: a PyTorch results file keeps every line through
// show and merge (byte for byte: PyTorch writes times as C++ streams do, six significant
// digits, and so do we), `tune` tunes an untuned file's ScaledGemm lines on the CPU, and the
// FP8 bench suite prints its table.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/cli_runner.h"

namespace tunableop {
namespace {

using testing::CliRunner;
using testing::entry_lines;

// As PyTorch 2.x writes a results file on a CUDA machine: its validators, then one line per
// problem (ScaledGemm's with solutions we never make, GEMM's beside them).
const char* kTorchValidators =
    "Validator,PT_VERSION,2.11.0\n"
    "Validator,CUBLASLT_VERSION,130000\n"
    "Validator,CUDA_VERSION,13.0\n"
    "Validator,GCN_ARCH_NAME,\n";
const std::vector<std::string> kTorchEntries = {
    "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN,tn_64_12288_2048_ld_2048_2048_64_rw_1_bias_None,"
    "Default,0.0123457",
    "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN,tn_4096_16_4096_ld_4096_4096_4096_rw_0_bias_"
    "BFloat16,Default,0.041",
    "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e5m2_float_TN,tn_11008_8_4096_ld_4096_4096_11008_rw_1_bias_BFloat16,"
    "Gemm_Hipblaslt_123456,0.5",
    "ScaledGemmTunableOp_Float8_e5m2_Float8_e4m3fn_Half_TN,tn_32000_1_4096_ld_4096_4096_32000_rw_0_bias_Half,Default,"
    "1.25e-05",
    "GemmTunableOp_BFloat16_TN,tn_4096_16_4096_ld_4096_4096_4096,Default,0.03",
};

std::string torch_file(const std::vector<std::string>& lines) {
  std::string s = kTorchValidators;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

TEST(CliScaledGemm, ShowAndMergeKeepEveryPyTorchLine) {
  CliRunner cli;
  cli.write("torch.csv", torch_file(kTorchEntries));
  auto r = cli.run({"show", "torch.csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("foreign results"), std::string::npos) << r.out;
  for (const char* s : {"tn_64_12288_2048_ld_2048_2048_64_rw_1_bias_None", "Gemm_Hipblaslt_123456",
                        "ScaledGemmTunableOp_Float8_e5m2_Float8_e4m3fn_Half_TN"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;

  // Merged with a second PyTorch file that re-tuned one problem faster and adds one: every line
  // comes back as written, the faster one in place of its key.
  const std::string faster =
      "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN,tn_64_12288_2048_ld_2048_2048_64_rw_1_bias_None,"
      "Default,0.0100001";
  const std::string added =
      "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_float_TN,tn_8_8_32_ld_32_32_8_rw_0_bias_None,Default,0.002";
  cli.write("torch2.csv", torch_file({faster, added}));
  r = cli.run({"merge", "torch.csv", "torch2.csv", "-o", "merged.csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> want = kTorchEntries;
  want[0] = faster;
  want.push_back(added);
  const std::string merged = cli.read("merged.csv");
  EXPECT_EQ(merged.rfind(kTorchValidators, 0), 0u) << merged;
  EXPECT_EQ(entry_lines(merged), want);

  // And once more through merge alone: a fixed point, byte for byte.
  r = cli.run({"merge", "merged.csv", "torch.csv", "-o", "again.csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(cli.read("again.csv"), merged);
}

TEST(CliScaledGemm, TunesAnUntunedFilesScaledGemmLines) {
  CliRunner cli;
  cli.write("untuned.csv",
            "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN,tn_24_3_64_ld_64_64_24_rw_1_bias_None\n"
            "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e5m2_float_TN,tn_17_5_33_ld_33_33_17_rw_0_bias_BFloat16\n"
            "ScaledGemmTunableOp_Float8_e4m3fnuz_Float8_e4m3fnuz_BFloat16_TN,tn_8_8_8_ld_8_8_8_rw_0_bias_None\n"
            "GemmTunableOp_float_NN,nn_8_8_8\n");
  auto r = cli.run({"tune", "untuned.csv"});
  EXPECT_EQ(r.code, 1) << "the ROCm line cannot be read";
  EXPECT_NE(r.err.find("fnuz fp8 types are ROCm's"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("tuned 3 problems"), std::string::npos) << r.out;
  const auto lines = entry_lines(cli.read("results0.csv"));
  ASSERT_EQ(lines.size(), 3u) << cli.read("results0.csv");
  EXPECT_EQ(lines[0].rfind("ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN,"
                           "tn_24_3_64_ld_64_64_24_rw_1_bias_None,Default,",
                           0),
            0u)
      << lines[0];
  EXPECT_EQ(lines[1].rfind("ScaledGemmTunableOp_Float8_e4m3fn_Float8_e5m2_float_TN,"
                           "tn_17_5_33_ld_33_33_17_rw_0_bias_BFloat16,Default,",
                           0),
            0u)
      << lines[1];
  EXPECT_EQ(lines[2].rfind("GemmTunableOp_float_NN,nn_8_8_8,", 0), 0u) << lines[2];
}

// The FP8 suite's table on the CPU (one small shape: the GPU is where its numbers mean something,
// scripts/gpu-fp8.sh), and a filter that matches nothing.
TEST(CliScaledGemm, BenchSuiteLlmFp8PrintsItsTable) {
  CliRunner cli;
  auto r = cli.run({"bench", "--suite", "llm-fp8", "--only", "gemma-2b.o@1", "--rounds", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| gemma-2b.o@1 | 2048x1x2048 | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("geomean speedup tuned vs Default (cuBLASLt's first heuristic): "), std::string::npos) << r.out;
  r = cli.run({"bench", "--suite", "llm-fp8", "--only", "no-such-shape"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no shape matches"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tunableop
