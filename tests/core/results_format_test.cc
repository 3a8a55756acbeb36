// Text form of results files: formatting, parsing, PyTorch files, malformed lines, naming rules.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <thread>

#include "core/results_stats.h"
#include "tunableop/results.h"

namespace tunableop {
namespace {

ResultEntry entry(std::string op, std::string params, std::string solution, double time_ms) {
  ResultEntry e;
  e.op = std::move(op);
  e.params = std::move(params);
  e.solution = std::move(solution);
  e.time_ms = time_ms;
  return e;
}

TEST(ResultsFormat, EntryLineLooksLikePytorch) {
  EXPECT_EQ(format_entry(entry("GemmTunableOp_float_NN", "nn_1024_512_2048", "Gemm_Openblas_t2", 0.0653662)),
            "GemmTunableOp_float_NN,nn_1024_512_2048,Gemm_Openblas_t2,0.0653662\n");
  EXPECT_EQ(format_entry(entry("op", "p", "Default", 12.5)), "op,p,Default,12.5\n");
  EXPECT_EQ(format_entry(entry("op", "p", "Default", 0.00001234)), "op,p,Default,1.234e-05\n");
}

TEST(ResultsFormat, ValidatorLinesAreSanitised) {
  Validators v = {{"TUNABLEOP_VERSION", "0.1.0"}, {"CPU", "Xeon, 2 cores\nsecond line"}, {"EMPTY", ""}};
  EXPECT_EQ(format_validators(v),
            "Validator,TUNABLEOP_VERSION,0.1.0\n"
            "Validator,CPU,Xeon; 2 cores second line\n"
            "Validator,EMPTY,\n");
}

TEST(ResultsFormat, RoundTrip) {
  Validators v = {{"TUNABLEOP_VERSION", "0.1.0"}, {"CPU", "Intel(R) Xeon(R) CPU @ 2.20GHz avx2 avx512f 2 cores"}};
  std::vector<ResultEntry> in = {entry("GemmTunableOp_float_TN", "tn_4096_1_4096", "Gemm_Own_avx2_6x16_t2", 1.25),
                                 entry("GemmTunableOp_double_NN", "nn_7_9_11_ld_8_12_8", "Default", 0.000321),
                                 entry("GemmTunableOp_float_NT", "nt_64_64_64_B_8", "Gemm_Openblas_t1", 1234.5)};
  std::string text = format_validators(v);
  for (const auto& e : in) text += format_entry(e);

  LoadReport r = parse_results(text, "round.csv");
  EXPECT_TRUE(r.ours);
  EXPECT_TRUE(r.malformed.empty());
  EXPECT_TRUE(r.foreign_validators.empty());
  EXPECT_EQ(r.validators, v);
  ASSERT_EQ(r.entries.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(r.entries[i].op, in[i].op);
    EXPECT_EQ(r.entries[i].params, in[i].params);
    EXPECT_EQ(r.entries[i].solution, in[i].solution);
    EXPECT_DOUBLE_EQ(r.entries[i].time_ms, in[i].time_ms);
  }
  // Formatting what was parsed gives the same bytes back.
  std::string again = format_validators(r.validators);
  for (const auto& e : r.entries) again += format_entry(e);
  EXPECT_EQ(again, text);
}

TEST(ResultsFormat, PytorchFileLoadsWithForeignValidators) {
  const std::string text =
      "Validator,PT_VERSION,2.4.0\n"
      "Validator,ROCM_VERSION,6.1.0.0-82-5fabb4c\n"
      "Validator,HIPBLASLT_VERSION,0.7.0-1549b021\n"
      "Validator,GCN_ARCH_NAME,gfx942:sramecc+:xnack-\n"
      "Validator,ROCBLAS_VERSION,4.1.0-cefa4a9b-dirty\n"
      "GemmTunableOp_float_NN,nn_1024_512_2048,Gemm_Hipblaslt_NN_52565,0.0653662\n"
      "GemmTunableOp_Half_TN,tn_4096_8_4096,Gemm_Rocblas_21350,0.0127\n"
      "GemmStridedBatchedTunableOp_float_NN,nn_64_64_64_B_16,Default,0.00912\n";
  LoadReport r = parse_results(text, "tunableop_results0.csv");
  EXPECT_FALSE(r.ours);
  EXPECT_TRUE(r.malformed.empty());
  EXPECT_EQ(r.foreign_validators, (std::vector<std::string>{"PT_VERSION", "ROCM_VERSION", "HIPBLASLT_VERSION",
                                                            "GCN_ARCH_NAME", "ROCBLAS_VERSION"}));
  ASSERT_EQ(r.validators.size(), 5u);
  EXPECT_EQ(r.validators[3].second, "gfx942:sramecc+:xnack-");
  ASSERT_EQ(r.entries.size(), 3u);
  EXPECT_EQ(r.entries[0].op, "GemmTunableOp_float_NN");
  EXPECT_EQ(r.entries[0].params, "nn_1024_512_2048");
  EXPECT_EQ(r.entries[0].solution, "Gemm_Hipblaslt_NN_52565");
  EXPECT_DOUBLE_EQ(r.entries[0].time_ms, 0.0653662);
  EXPECT_EQ(r.entries[2].solution, "Default");
}

TEST(ResultsFormat, MalformedLinesAreReportedWithLineNumbersAndSkipped) {
  const std::string text =
      "Validator,TUNABLEOP_VERSION,0.1.0\n"  // 1
      "op_a,pa,Default,0.5\n"                // 2
      "op_b,pb,Default\n"                    // 3 too few fields
      "\n"                                   // 4 blank
      "op_c,pc,Default,fast\n"               // 5 not a number
      "op_d,pd,,0.1\n"                       // 6 empty solution
      "op_e,pe,Default,0.2,extra\n"          // 7 too many fields
      "Validator,ONLY_KEY\n"                 // 8 validator without value
      "op_f,pf,Default,-1\n"                 // 9 negative time
      "op_g,pg,Default,0.25\n"               // 10
      "op_h,ph,Default,1e400\n";             // 11 not finite
  LoadReport r = parse_results(text, "f.csv");
  ASSERT_EQ(r.malformed.size(), 7u);
  const char* expected_prefix[] = {
      "f.csv:3: ", "f.csv:5: ", "f.csv:6: ", "f.csv:7: ", "f.csv:8: ", "f.csv:9: ", "f.csv:11: "};
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(r.malformed[i].rfind(expected_prefix[i], 0), 0u) << r.malformed[i];
  EXPECT_NE(r.malformed[1].find("fast"), std::string::npos);
  EXPECT_NE(r.malformed[2].find("solution"), std::string::npos);
  ASSERT_EQ(r.entries.size(), 2u);
  EXPECT_EQ(r.entries[0].op, "op_a");
  EXPECT_EQ(r.entries[1].op, "op_g");
}

TEST(ResultsFormat, CrlfBlankLinesLateValidatorsAndLaterLineWins) {
  const std::string text =
      "op_a,pa,Slow,2.0\r\n"
      "\r\n"
      "   \n"
      "op_b,pb,Default,1.0\r\n"
      "Validator,TUNABLEOP_VERSION,0.1.0\r\n"
      "op_a,pa,Fast,0.5\r\n"
      "op_c,pc,Default,3";  // no final newline
  LoadReport r = parse_results(text, "crlf.csv");
  EXPECT_TRUE(r.malformed.empty());
  EXPECT_TRUE(r.ours);
  ASSERT_EQ(r.validators.size(), 1u);
  EXPECT_EQ(r.validators[0].second, "0.1.0");  // no stray '\r'
  ASSERT_EQ(r.entries.size(), 3u);
  EXPECT_EQ(r.entries[0].solution, "Fast");  // replaced in place, keeps first position
  EXPECT_DOUBLE_EQ(r.entries[0].time_ms, 0.5);
  EXPECT_EQ(r.entries[2].op, "op_c");
}

TEST(ResultsFormat, ConflictingRepeatedValidatorIsReported) {
  LoadReport r =
      parse_results("Validator,TUNABLEOP_VERSION,0.1.0\nValidator,CPU,a\nValidator,CPU,a\nValidator,CPU,b\n", "v.csv");
  ASSERT_EQ(r.malformed.size(), 1u);
  EXPECT_EQ(r.malformed[0].rfind("v.csv:4: ", 0), 0u);
  ASSERT_EQ(r.validators.size(), 2u);
  EXPECT_EQ(r.validators[1].second, "a");
}

TEST(ResultsFormat, EmptyTextIsAnEmptyForeignlessReport) {
  LoadReport r = parse_results("", "e.csv");
  EXPECT_FALSE(r.ours);
  EXPECT_TRUE(r.entries.empty());
  EXPECT_TRUE(r.malformed.empty());
  EXPECT_TRUE(r.foreign_validators.empty());
}

TEST(ResultsPathFor, NamingRule) {
  EXPECT_EQ(results_path_for("tunableop_results%d.csv", "0"), "tunableop_results0.csv");
  EXPECT_EQ(results_path_for("out/dev%d/res%d.csv", "3"), "out/dev3/res3.csv");
  EXPECT_EQ(results_path_for("src/matmul_result.csv", "0"), "src/matmul_result0.csv");
  EXPECT_EQ(results_path_for("results", "1"), "results1");
  EXPECT_EQ(results_path_for("dir.v2/results", "1"), "dir.v2/results1");
  EXPECT_EQ(results_path_for(".results", "2"), ".results2");
  EXPECT_EQ(results_path_for("a/b.tar.gz", "0"), "a/b.tar0.gz");
  EXPECT_EQ(results_path_for("r%d.csv", "12"), "r12.csv");
}

TEST(ResultsPathFor, EnvSiblingIsStableAndDependsOnValidators) {
  Validators a = {{"TUNABLEOP_VERSION", "0.1.0"}, {"CPU", "x"}};
  Validators a_reordered = {{"CPU", "x"}, {"TUNABLEOP_VERSION", "0.1.0"}};
  Validators b = {{"TUNABLEOP_VERSION", "0.1.0"}, {"CPU", "y"}};
  std::string sa = env_sibling_path("dir/tunableop_results0.csv", a);
  EXPECT_EQ(sa, "dir/tunableop_results0.env-" + validators_hash(a) + ".csv");
  EXPECT_EQ(validators_hash(a).size(), 8u);
  EXPECT_EQ(validators_hash(a), validators_hash(a_reordered));
  EXPECT_NE(validators_hash(a), validators_hash(b));
  EXPECT_EQ(env_sibling_path("results", a), "results.env-" + validators_hash(a) + ".csv");
  EXPECT_EQ(env_sibling_path("r.csv", a, 3), "r.env-" + validators_hash(a) + "-3.csv");
}

TEST(ResultsStats, RoundTrip) {
  ResultEntry e = entry("GemmTunableOp_float_NN", "nn_8_8_8", "Default", 0.5);
  EXPECT_EQ(format_stats_line(e), "");
  e.stats = Measurement{0.4, 0.5, 0.55, 0.05, 37};
  e.tuning_ms = 120.25;
  std::string line = format_stats_line(e);
  EXPECT_EQ(line, "GemmTunableOp_float_NN,nn_8_8_8,Default,0.4,0.5,0.55,0.05,37,120.25\n");
  std::vector<std::string> bad;
  auto parsed = parse_stats(line + "x,y,z,1\n", "s.stats", &bad);
  ASSERT_EQ(parsed.size(), 1u);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].rfind("s.stats:2: ", 0), 0u);
  EXPECT_EQ(parsed[0].stats->runs, 37);
  EXPECT_DOUBLE_EQ(parsed[0].tuning_ms, 120.25);
  EXPECT_DOUBLE_EQ(parsed[0].stats->std_ms, 0.05);
}

// A run count that is no int (a fraction, negative, past INT_MAX, infinite) makes the line
// malformed; the fuzz target found a count of 1.3e11 converted to int out of range.
TEST(ResultsStats, RunCountOutOfIntRangeIsMalformed) {
  for (const char* runs : {"133333333333", "-3", "2.5", "inf", "nan", "2147483648"}) {
    std::vector<std::string> bad;
    auto parsed = parse_stats(fmt::format("op,p,s,0.4,0.5,0.55,0.05,{},1\n", runs), "s.stats", &bad);
    EXPECT_TRUE(parsed.empty()) << runs;
    ASSERT_EQ(bad.size(), 1u) << runs;
    EXPECT_EQ(bad[0].rfind("s.stats:1: ", 0), 0u) << bad[0];
  }
  std::vector<std::string> bad;
  auto parsed = parse_stats("op,p,s,0.4,0.5,0.55,0.05,2147483647,1\n", "s.stats", &bad);
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(parsed[0].stats->runs, 2147483647);
}

// A note (the in-context check's drop) is the tenth field; a note alone has no runs and no
// statistics, and commas in it cannot break the line.
TEST(ResultsStats, NotesRoundTrip) {
  ResultEntry e = entry("GemmTunableOp_float_NN", "nn_8_8_8", "Default", 0.5);
  e.note = "in-context check: X lost, Default kept";
  std::string line = format_stats_line(e);
  EXPECT_EQ(line.rfind("GemmTunableOp_float_NN,nn_8_8_8,Default,0,0,0,0,0,0,in-context check: X lost", 0), 0u) << line;
  std::vector<std::string> bad;
  auto parsed = parse_stats(line, "s.stats", &bad);
  ASSERT_EQ(parsed.size(), 1u) << (bad.empty() ? "" : bad[0]);
  EXPECT_FALSE(parsed[0].stats.has_value());
  EXPECT_EQ(parsed[0].note.rfind("in-context check: X lost", 0), 0u) << parsed[0].note;
  EXPECT_NE(parsed[0].note.find("Default kept"), std::string::npos);
  e.stats = Measurement{0.4, 0.5, 0.55, 0.05, 37};
  parsed = parse_stats(format_stats_line(e), "s.stats", &bad);
  ASSERT_EQ(parsed.size(), 1u);
  ASSERT_TRUE(parsed[0].stats.has_value());
  EXPECT_EQ(parsed[0].stats->runs, 37);
  EXPECT_FALSE(parsed[0].note.empty());
}

// How the final rounds ran and the device's clock and power then (issue 31): fields 11-13, after
// the note's (empty when there is no note); an unknown reading (no NVML) is an empty field.
TEST(ResultsStats, FinalRoundsClockAndPowerRoundTrip) {
  ResultEntry e = entry("GemmTunableOp_BFloat16_TN", "tn_32000_2048_4096", "Gemm_Lt_t23", 0.68);
  e.stats = Measurement{0.67, 0.68, 0.685, 0.004, 40};
  e.tuning_ms = 640;
  e.final_rounds = "sustained";
  e.sm_mhz = 1755;
  e.power_w = 688.5;
  std::string line = format_stats_line(e);
  EXPECT_EQ(
      line,
      "GemmTunableOp_BFloat16_TN,tn_32000_2048_4096,Gemm_Lt_t23,0.67,0.68,0.685,0.004,40,640,,sustained,1755,688.5\n");
  std::vector<std::string> bad;
  auto parsed = parse_stats(line, "s.stats", &bad);
  ASSERT_EQ(parsed.size(), 1u) << (bad.empty() ? "" : bad[0]);
  EXPECT_TRUE(parsed[0].note.empty());
  EXPECT_EQ(parsed[0].final_rounds, "sustained");
  EXPECT_DOUBLE_EQ(parsed[0].sm_mhz, 1755);
  EXPECT_DOUBLE_EQ(parsed[0].power_w, 688.5);

  // No NVML: the readings are empty fields, and read back as unknown.
  e.sm_mhz = e.power_w = 0;
  e.final_rounds = "burst";
  e.note = "a note, with a comma";
  line = format_stats_line(e);
  EXPECT_NE(line.find(",a note; with a comma,burst,,\n"), std::string::npos) << line;
  parsed = parse_stats(line, "s.stats", &bad);
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(parsed[0].final_rounds, "burst");
  EXPECT_EQ(parsed[0].note, "a note; with a comma");
  EXPECT_EQ(parsed[0].sm_mhz, 0);
  EXPECT_EQ(parsed[0].power_w, 0);

  // 11 or 12 fields, or a reading that is no number, make the line malformed.
  for (const char* tail : {",n,sustained", ",n,sustained,1755", ",n,sustained,fast,700", ",n,sustained,1755,-3"}) {
    bad.clear();
    EXPECT_TRUE(parse_stats(std::string("op,p,s,0.4,0.5,0.55,0.05,3,1") + tail + "\n", "s.stats", &bad).empty())
        << tail;
    EXPECT_EQ(bad.size(), 1u) << tail;
  }
}

TEST(ResultsStore, InsertReplacesAndKeepsOrder) {
  ResultsStore s;
  s.insert(entry("a", "1", "X", 1));
  s.insert(entry("b", "1", "Y", 2));
  s.insert(entry("a", "1", "Z", 0.5));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_TRUE(s.contains("a", "1"));
  EXPECT_FALSE(s.contains("a", "2"));
  auto hit = s.lookup("a", "1");
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->solution, "Z");
  auto all = s.entries();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].op, "a");
  EXPECT_EQ(all[1].op, "b");
  EXPECT_FALSE(s.lookup("c", "1").has_value());
  s.clear();
  EXPECT_EQ(s.size(), 0u);
  EXPECT_FALSE(s.contains("a", "1"));
}

TEST(ResultsStore, ConcurrentInsertAndLookup) {
  ResultsStore s;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&s, t] {
      for (int i = 0; i < 500; ++i) {
        s.insert(entry("op", std::to_string(i % 100), fmt::format("S{}", t), i));
        (void)s.lookup("op", std::to_string((i * 7) % 100));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(s.size(), 100u);
}

}  // namespace
}  // namespace tunableop
