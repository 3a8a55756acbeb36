// The `tunableop` binary against the bad arguments and inputs of issue 9: every case exits 1-127
// with a message that names what is wrong, never a signal, never a hang.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench_suites.h"
#include "cli_process.h"
#include "core/results_test_util.h"
#include "llm/random_model.h"
#include "llm/weights.h"

namespace tunableop {
namespace {

using testing::CliRun;
using testing::describe;
using testing::run_cli;
using testing::TempDir;
using testing::write_text;

// A usage or input error: exit 2 with `message` on stderr.
void expect_refused(const CliRun& r, const std::string& message, int code = 2) {
  EXPECT_EQ(r.signal, 0) << describe(r);
  EXPECT_FALSE(r.timed_out) << describe(r);
  EXPECT_EQ(r.exit_code, code) << describe(r);
  EXPECT_NE(r.err.find(message), std::string::npos) << "expected \"" << message << "\"\n" << describe(r);
}

TEST(CliHardening, BenchHugeLeadingDimensionIsRefused) {
  // Was heap corruption (SIGABRT): ldc * 63 wrapped and C was sized from the wrapped value.
  expect_refused(run_cli({"bench", "-m", "64", "-n", "64", "-k", "64", "--ldc", "4611686018427387904"}),
                 "C spans more bytes than a 64-bit size can hold");
}

TEST(CliHardening, BenchSizeBeyondMemoryIsRefused) {
  expect_refused(run_cli({"bench", "-m", "1000000000000"}), "more than this machine's memory");
  CliRun sci = run_cli({"bench", "-m", "1e12"});  // not an integer to CLI11 here: still no abort
  EXPECT_EQ(sci.signal, 0) << describe(sci);
  EXPECT_EQ(sci.exit_code, 2) << describe(sci);
}

TEST(CliHardening, TuneLineWithHugeBatchFailsThatLineOnly) {
  TempDir dir;
  write_text(dir.file("u.csv"),
             "GemmStridedBatchedTunableOp_float_NN,nn_4_4_4_B_288230376151711744\nGemmTunableOp_float_NN,nn_3_3_3\n");
  CliRun r = run_cli({"tune", dir.file("u.csv")}, {.env = {"TUNABLEOP_FILENAME=" + dir.file("r%d.csv")}});
  expect_refused(r, "A spans more bytes than a 64-bit size can hold", 1);
  EXPECT_NE(r.out.find("tuned 1 problems (0 not saved, 0 already tuned, 1 failed"), std::string::npos) << describe(r);
}

TEST(CliHardening, GpusMustBeOrdinals) {
  TempDir dir;
  write_text(dir.file("u.csv"), "GemmTunableOp_float_NN,nn_3_3_3\n");
  expect_refused(run_cli({"tune", "--gpus", "abc", dir.file("u.csv")}), "--gpus: 'abc' is not a GPU ordinal");
  expect_refused(run_cli({"tune", "--gpus", "0,x", dir.file("u.csv")}), "'x' is not a GPU ordinal");
}

TEST(CliHardening, BatchZeroSaysSoPlainly) {
  for (const char* cmd : {"bench", "llm"}) {
    CliRun r = run_cli({cmd, "--batch", "0"});
    expect_refused(r, "--batch: must be >= 1 (got 0)");
    EXPECT_LT(r.err.size(), 200u) << "no 300-digit range: " << r.err;
  }
}

TEST(CliHardening, NegativeCountsAreRefusedNotIgnored) {
  expect_refused(run_cli({"llm", "--prompt-len", "-1"}), "--prompt-len: must be >= 0 (got -1)");
  expect_refused(run_cli({"llm", "--max-seq", "-3"}), "--max-seq: must be >= 0 (got -3)");
  expect_refused(run_cli({"bench", "--iters", "-1"}), "--iters: must be >= 0 (got -1)");
  expect_refused(run_cli({"llm", "--layers", "-2"}), "--layers: must be >= 0 (got -2)");
  expect_refused(run_cli({"bench", "-m", "-5"}), "-m: must be >= 0 (got -5)");
  expect_refused(run_cli({"llm", "--kv-cache", "paged", "--kv-pages", "-3"}), "--kv-pages: must be >= 0 (got -3)");
}

TEST(CliHardening, LlmHugeRequestsAreRefusedBeforeAllocating) {
  CliRun r = run_cli({"llm", "--max-new-tokens", "1000000000000"});
  expect_refused(r, "the engine's KV cache and buffers");
  EXPECT_LT(r.max_rss_kib, 1024 * 1024) << "refused before allocating";
  expect_refused(run_cli({"llm", "--prompt-len", "1000000000000"}), "more than this machine's memory");
  expect_refused(run_cli({"llm", "--model", "builtin:llama-2-7b", "--layers", "100000"}),
                 "more than this machine's memory");
  expect_refused(run_cli({"llm", "--pad-multiple", "9223372036854775807"}), "too large");
  // A paged cache's pool: its byte count must not wrap (2^40 pages), nor exceed the machine.
  expect_refused(run_cli({"llm", "--kv-cache", "paged", "--kv-pages", "1099511627776"}),
                 "a paged KV cache of 1099511627776 pages");
  expect_refused(run_cli({"llm", "--kv-cache", "paged", "--kv-pages", "1073741824"}),
                 "more than this machine's memory");
}

// A small Hugging Face directory whose config.json is then replaced by `config`.
std::string model_dir(const TempDir& dir, const nlohmann::json& config_edit) {
  llm::ModelConfig c = *llm::preset_config("tiny");
  c.vocab_size = 64;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  const std::string path = dir.file("model");
  EXPECT_TRUE(llm::save_model(llm::make_random_weights(c, 1), path).is_ok());
  nlohmann::json j = nlohmann::json::parse(llm::model_config_to_json(c));
  j.merge_patch(config_edit);
  write_text(path + "/config.json", j.dump());
  return path;
}

TEST(CliHardening, ConfigWithHugeVocabularyIsCheckedAgainstTheCheckpointFirst) {
  TempDir dir;
  CliRun r = run_cli({"llm", "--model", model_dir(dir, {{"vocab_size", 1000000000}})});
  expect_refused(r, "\"model.embed_tokens.weight\" has shape [64, 16], expected [1000000000, 16]");
  EXPECT_LT(r.max_rss_kib, 1024 * 1024) << "nothing allocated for a billion-entry vocabulary";
}

TEST(CliHardening, CheckpointClaimingAMillionLayersFailsFast) {
  TempDir dir;
  CliRun r = run_cli({"llm", "--model", model_dir(dir, {{"num_hidden_layers", 1000000}})});
  expect_refused(r, "missing tensor \"model.layers.2.input_layernorm.weight\"");
  EXPECT_LT(r.max_rss_kib, 1024 * 1024) << "was 9+ GB before failing";
}

TEST(CliHardening, OverlappingTensorsAreRefused) {
  TempDir dir;
  const std::string path = model_dir(dir, nlohmann::json::object());
  // Point a tensor at the bytes of the one stored first (offset 0); smaller numbers keep the
  // header no longer than it was.
  std::string bytes = testing::read_text(path + "/model.safetensors");
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = len << 8 | uint8_t(bytes[size_t(i)]);
  nlohmann::json h = nlohmann::json::parse(bytes.substr(8, len));
  std::string at_zero, other;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    (it.value()["data_offsets"][0] == 0 ? at_zero : other) = it.key();
  }
  ASSERT_FALSE(at_zero.empty());
  ASSERT_FALSE(other.empty());
  auto& off = h[other]["data_offsets"];
  off = {0, off[1].get<uint64_t>() - off[0].get<uint64_t>()};
  std::string nh = h.dump();
  nh.resize(len, ' ');  // same length: the data section stays where it is
  ASSERT_LE(h.dump().size(), len);
  write_text(path + "/model.safetensors", bytes.substr(0, 8) + nh + bytes.substr(8 + len));
  expect_refused(run_cli({"llm", "--model", path}), "overlap in the data: the file is malformed");
}

TEST(CliHardening, UnknownCommandWithHelpIsAnError) {
  expect_refused(run_cli({"nosuch", "--help"}), "unknown command 'nosuch'");
  expect_refused(run_cli({"--help", "nosuch"}), "unknown command 'nosuch'");
  EXPECT_EQ(run_cli({"--help"}).exit_code, 0);
  EXPECT_EQ(run_cli({"bench", "--help"}).exit_code, 0);
  expect_refused(run_cli({}), "A subcommand is required");
}

TEST(CliHardening, EmptySuiteFileAndUnmatchedOnlyAreErrors) {
  TempDir dir;
  write_text(dir.file("empty.csv"), "");
  write_text(dir.file("comments.csv"), "# name,dtype,transa,transb,m,n,k\n\n  \n");
  expect_refused(run_cli({"bench", "--suite-file", dir.file("empty.csv")}), "has no shapes");  // was SIGSEGV
  expect_refused(run_cli({"bench", "--suite-file", dir.file("comments.csv")}), "has no shapes");
  expect_refused(run_cli({"bench", "--suite-file", "/dev/null"}), "is a character device, not a regular file");
  expect_refused(run_cli({"bench", "--suite-file", dir.path().string()}), "is a directory");
  expect_refused(run_cli({"bench", "--suite", "cpu-llm", "--only", "NOSUCHSHAPE"}),
                 "--only NOSUCHSHAPE: no shape of the suite cpu-llm matches");
}

TEST(CliHardening, ShowEscapesControlBytesFromTheFile) {
  TempDir dir;
  write_text(dir.file("r.csv"),
             "Validator,TUNABLEOP_VERSION,0.1.0\nValidator,CPU,\x1b]0;owned\x07\n"
             "GemmTunableOp_float_NN,nn_1_1_1,\x1b[2J\x1b[31mEvil,0.5\n");
  CliRun r = run_cli({"show", dir.file("r.csv")});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.all().find('\x1b'), std::string::npos) << "no raw escape reaches the terminal";
  EXPECT_EQ(r.all().find('\x07'), std::string::npos);
  EXPECT_NE(r.out.find("\\x1b[2J\\x1b[31mEvil"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\\x1b]0;owned\\x07"), std::string::npos) << r.out;
}

// --- Issue 33 (a red-team pass): each finding's behaviour.

TEST(CliRobust, ShowStatsEscapesTheNoteAndCapsColumnWidths) {
  TempDir dir;
  // Finding 11: the .stats note and the op/params/solution under the table went out raw.
  write_text(dir.file("r.csv"), "Validator,TUNABLEOP_VERSION,0.1.0\nOp\x1b[31m,p\x1b]0;x\x07,S\x1b[2J,0.5\n");
  write_text(dir.file("r.csv.stats"), "Op\x1b[31m,p\x1b]0;x\x07,S\x1b[2J,1,1,1,0,5,10,note \x1b[5mblink\n");
  CliRun r = run_cli({"show", "--stats", dir.file("r.csv")});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.all().find('\x1b'), std::string::npos) << describe(r);
  EXPECT_NE(r.out.find("note \\x1b[5mblink"), std::string::npos) << r.out;
  // Finding 15: one 10 MB field among 86 entries printed 912 MB (every row padded to it).
  std::string text = "Validator,TUNABLEOP_VERSION,0.1.0\n";
  for (int i = 0; i < 86; ++i)
    text += "GemmTunableOp_float_NN,nn_" + std::to_string(i + 1) + "_1_1," +
            (i == 40 ? std::string(10 << 20, 'x') : "S") + ",0.5\n";
  write_text(dir.file("wide.csv"), text);
  r = run_cli({"show", dir.file("wide.csv")});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_LT(r.out.size(), size_t(64) << 10) << "columns are capped, long cells cut";
  EXPECT_NE(r.out.find("... (10485760 bytes)"), std::string::npos);
}

TEST(CliRobust, SuiteFileShapeNamesCannotReachTheTerminalRaw) {
  // Finding 11: `bench --suite-file` printed shape names raw (its table, its progress lines, the
  // CSV). They are made printable where the file is read (a whole suite run takes 20 s here).
  TempDir dir;
  write_text(dir.file("s.csv"), "evil\x1b]0;owned\x07,fp32,N,N,8,8,8\nplain,fp32,T,N,4,4,4\n");
  auto shapes = cli::read_suite_file(dir.file("s.csv"));
  ASSERT_TRUE(shapes.is_ok()) << shapes.status().to_string();
  ASSERT_EQ(shapes->size(), 2u);
  EXPECT_EQ((*shapes)[0].name, "evil\\x1b]0;owned\\x07");
  EXPECT_EQ((*shapes)[1].name, "plain");
}

TEST(CliRobust, MergeNeverDropsUnparsableLinesSilently) {
  // Finding 10: lines it could not parse were dropped and merge exited 0 (an extra field, a
  // missing time) even when the output was that input.
  TempDir dir;
  const std::string a = "Validator,TUNABLEOP_VERSION,0.1.0\nOp,p1,S,0.5\nOp,p2,S,0.5,extra\nOp,p3,S\n";
  write_text(dir.file("a.csv"), a);
  write_text(dir.file("b.csv"), "Validator,TUNABLEOP_VERSION,0.1.0\nOp,p4,S,0.25\n");
  CliRun r = run_cli({"merge", dir.file("a.csv"), dir.file("b.csv"), "-o", dir.file("a.csv")});
  expect_refused(r, "replacing it with the merge would drop them", 1);
  EXPECT_EQ(testing::read_text(dir.file("a.csv")), a) << "the input keeps every line";
  r = run_cli({"merge", dir.file("a.csv"), dir.file("b.csv"), "-o", dir.file("m.csv")});
  expect_refused(r, "2 malformed lines skipped (not in", 1);
  EXPECT_NE(testing::read_text(dir.file("m.csv")).find("Op,p4,S,0.25"), std::string::npos);
}

TEST(CliRobust, SizesThatCannotFitAreRefusedUpFront) {
  // Finding 5: every check passed and the run was OOM-killed after 38 s (the prefill's
  // activations were never counted); an all-reduce of 8 GiB per rank on the CPU likewise.
  // (Where the KV cache alone exceeds the machine, as on a 24 GiB one, that is said first.)
  CliRun r = run_cli({"llm", "--batch", "1048576"});
  expect_refused(r, "for 1048576 sequences");
  EXPECT_LT(r.max_rss_kib, 1024 * 1024) << "refused before allocating";
  // A KV cache of 800 MB that fits anywhere, and attention scores of a terabyte.
  r = run_cli({"llm", "--prompt-len", "200000", "--max-new-tokens", "1"});
  expect_refused(r, "a prefill of 1 sequence of 200000 tokens (the KV cache, activations and attention scores)");
  EXPECT_LT(r.max_rss_kib, 1024 * 1024);
  r = run_cli({"allreduce", "--device", "cpu", "--sizes", "8192M"});
  expect_refused(r, "an all-reduce of 8192 MiB over 2 ranks needs");
  EXPECT_LT(r.max_rss_kib, 1024 * 1024);
}

TEST(CliRobust, DeeplyNestedConfigFieldIsAnError) {
  // Finding 4: SIGSEGV while building the message (dump() recursed per level).
  TempDir dir;
  const std::string path = model_dir(dir, nlohmann::json::object());
  std::string text = testing::read_text(path + "/config.json");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const size_t at = text.find("\"num_hidden_layers\":");
  ASSERT_NE(at, std::string::npos) << text;
  text.insert(at + std::string("\"num_hidden_layers\":").size(), deep + ",\"unused\":");
  write_text(path + "/config.json", text);
  expect_refused(run_cli({"llm", "--model", path}),
                 "\"num_hidden_layers\" must be an integer (got an array of 1 elements)");
}

TEST(CliRobust, AddedTokenIdsMustBeWholeAndInRange) {
  // Finding 14: "4294967297" became the BOS id 1, "3abc" the id 3.
  TempDir dir;
  const std::string path = model_dir(dir, nlohmann::json::object());
  for (const char* key : {"4294967297", "3abc"}) {
    write_text(path + "/tokenizer_config.json",
               std::string(R"({"bos_token": "<s>", "added_tokens_decoder": {")") + key + R"(": {"content": "<s>"}}})");
    expect_refused(
        run_cli({"llm", "--model", path, "--mode", "generate", "--prompt-ids", "3,4", "--max-new-tokens", "1"}),
        std::string("added_tokens_decoder key \"") + key + "\" is not a token id");
  }
}

TEST(CliRobust, SaveModelNeverOverwritesTheModelItReads) {
  // Finding 6: --save-model DIR with DIR the model directory replaced the fp32 checkpoint with
  // bf16 and config.json without its BOS/EOS ids.
  TempDir dir;
  const std::string path = model_dir(dir, nlohmann::json::object());
  const std::string before = testing::read_text(path + "/model.safetensors");
  expect_refused(run_cli({"llm", "--model", path, "--save-model", path, "--max-new-tokens", "1"}),
                 "is the model directory being read");
  expect_refused(
      run_cli({"llm", "--model", path, "--save-model", path + "/.", "--overwrite-model", "--max-new-tokens", "1"}),
      "is the model directory being read");
  EXPECT_EQ(testing::read_text(path + "/model.safetensors"), before);
  // Another directory that holds a model: only when asked.
  const std::string other = dir.file("other");
  ASSERT_EQ(run_cli({"llm", "--model", path, "--save-model", other, "--max-new-tokens", "1"}).exit_code, 0);
  expect_refused(run_cli({"llm", "--model", path, "--save-model", other, "--max-new-tokens", "1"}),
                 "already holds a model (config.json); add --overwrite-model");
  CliRun r = run_cli({"llm", "--model", path, "--save-model", other, "--overwrite-model", "--max-new-tokens", "1"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
}

}  // namespace
}  // namespace tunableop
