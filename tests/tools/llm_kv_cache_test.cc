// `tunableop llm` with a paged KV cache and a batch of prompts of different lengths: the same
// greedy ids as the static cache, the memory it reports, and the errors of its flags.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "llm_test_util.h"

namespace tunableop::llm {
namespace {

struct CliRun {
  int rc = -1;
  std::string out, err;
};

CliRun cli(const testing::ScratchDir& dir, const std::string& args) {
  const std::string out = dir.path() + "/out.txt", err = dir.path() + "/err.txt";
  const std::string cmd = std::string(TUNABLEOP_CLI) + " llm " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  std::ifstream o(out), e(err);
  r.out.assign(std::istreambuf_iterator<char>(o), {});
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

// Tiny built-in model, three prompts of 5, 17 and 9 tokens, 6 new tokens, one timed run.
const char* kBatch =
    "--model builtin:tiny --layers 2 --prompt-lens 5,17,9 --max-new-tokens 6 --warmup 0 --iterations 1";

TEST(LlmCommandKvCache, PagedGivesTheStaticIdsAndReportsItsMemory) {
  testing::ScratchDir dir("cli_kv");
  CliRun st = cli(dir, std::string(kBatch) + " --json");
  CliRun pg = cli(dir, std::string(kBatch) + " --json --kv-cache paged --page-size 4");
  ASSERT_EQ(st.rc, 0) << st.err;
  ASSERT_EQ(pg.rc, 0) << pg.err;
  const auto s = nlohmann::json::parse(st.out), p = nlohmann::json::parse(pg.out);
  EXPECT_EQ(s["generated_ids"], p["generated_ids"]);
  EXPECT_EQ(s["kv_cache"]["kind"], "static");
  EXPECT_EQ(p["kv_cache"]["kind"], "paged");
  EXPECT_EQ(p["kv_cache"]["page_size"], 4);
  // Positions reached: 5 + 5, 17 + 5, 9 + 5 -> 3 + 6 + 4 pages of 4; the pool is exactly that.
  const int64_t per_position = p["kv_cache"]["bytes_per_position"];
  EXPECT_EQ(p["kv_cache"]["pages"], 13);
  EXPECT_EQ(p["kv_cache"]["peak_in_use_bytes"], 13 * 4 * per_position);
  EXPECT_EQ(p["kv_cache"]["allocated_bytes"], 13 * 4 * per_position);
  // Static: 3 sequences x max(17 padded to 24, 17 + 6) positions.
  EXPECT_EQ(s["kv_cache"]["allocated_bytes"], 3 * 24 * per_position);
  EXPECT_EQ(p["kv_cache"]["static_bytes"], s["kv_cache"]["allocated_bytes"]);
  EXPECT_EQ(s["attention_problems"].size(), 2u);

  CliRun text = cli(dir, std::string(kBatch) + " --kv-cache paged --page-size 4");
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_NE(text.out.find("KV cache: paged (pages of 4 positions), peak"), std::string::npos) << text.out;
}

TEST(LlmCommandKvCache, BadFlagsAreErrors) {
  testing::ScratchDir dir("cli_kv_bad");
  auto fails_with = [&](const std::string& args, const std::string& what) {
    CliRun r = cli(dir, std::string(kBatch) + " " + args);
    EXPECT_NE(r.rc, 0) << args;
    EXPECT_NE(r.err.find(what), std::string::npos) << args << ": " << r.err;
  };
  fails_with("--kv-cache paged --kv-pages 2", "out of pages");
  fails_with("--page-size 16", "--kv-cache paged");
  fails_with("--kv-pages 8", "--kv-cache paged");
  fails_with("--kv-cache pages", "--kv-cache");
  CliRun r = cli(dir, "--model builtin:tiny --layers 2 --prompt-lens 3,x --max-new-tokens 2");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("--prompt-lens: \"x\""), std::string::npos) << r.err;
  r = cli(dir, "--model builtin:tiny --layers 2 --prompt-lens 3,4 --prompt-len 5 --max-new-tokens 2");
  EXPECT_NE(r.rc, 0);
}

}  // namespace
}  // namespace tunableop::llm
