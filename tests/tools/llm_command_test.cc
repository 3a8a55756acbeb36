// `tunableop llm` end to end, text side: the built binary run on a tiny Llama directory whose
// vocabulary is the test tokenizer's. Output is compared with the library's own greedy run; the
// errors (no tokenizer, no SentencePiece, options of the wrong mode) must name what is wrong.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "llm/generate.h"
#include "llm/text/special_tokens.h"
#include "llm/text/text_stream.h"
#include "text_test_util.h"

namespace tunableop::llm {
namespace {

using testing::ScratchDir;

struct Result {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs `tunableop llm ARGS` with `input` on stdin.
Result llm(const ScratchDir& scratch, const std::string& args, const std::string& input = "") {
  const std::string in = scratch.path() + "/stdin.txt", out = scratch.path() + "/stdout.txt",
                    err = scratch.path() + "/stderr.txt";
  std::ofstream(in, std::ios::binary) << input;
  const std::string cmd = std::string(TUNABLEOP_CLI) + " llm " + args + " <" + in + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  Result r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

class LlmCommandText : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<ScratchDir>("cli_text");
    dir_ = scratch_->path() + "/model";
    std::filesystem::create_directories(dir_);
    testing::write_text_model(dir_);
  }
  // The greedy continuation of `prompt` as the library computes it (BOS 1 prepended).
  std::string continuation(const Tokenizer& tok, const std::string& prompt, int64_t n) {
    auto e = testing::text_engine();
    SpecialTokens s;
    s.bos = 1;
    auto ids = encode_prompt(tok, s, prompt);
    auto g = generate(*e.engine, {*ids}, n);
    EXPECT_TRUE(g.is_ok());
    auto text = decode_continuation(tok, *ids, g->tokens[0]);
    EXPECT_TRUE(text.is_ok());
    greedy_ = g->tokens[0];
    return *text;
  }
  std::unique_ptr<ScratchDir> scratch_;
  std::string dir_;
  std::vector<int32_t> greedy_;
};

TEST_F(LlmCommandText, TextPromptPrintsThePromptAndItsGreedyContinuation) {
  const std::string args = "--model " + dir_ + " --prompt 'Hello Earthlings!' --max-new-tokens 10 --ignore-eos";
  Result r = llm(*scratch_, args);
  if (!tokenizer_available()) {
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("no SentencePiece"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--prompt-ids"), std::string::npos) << r.err;
    return;
  }
  LOAD_TEST_TOKENIZER(tok);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "Hello Earthlings!" + continuation(tok, "Hello Earthlings!", 10) + "\n");
  EXPECT_NE(r.err.find("Tokenizer: sentencepiece, 512 pieces"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("BOS 1 (generation_config.json), EOS 2 (generation_config.json)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[10 new tokens"), std::string::npos) << r.err;
}

TEST_F(LlmCommandText, EosStopsUnlessIgnored) {
  LOAD_TEST_TOKENIZER(tok);
  const std::string text = continuation(tok, "The small robot", 12);
  const int32_t eos = greedy_[3];
  std::ofstream(dir_ + "/generation_config.json", std::ios::trunc)
      << "{\"bos_token_id\": 1, \"eos_token_id\": [" << eos << "]}";
  Result stopped = llm(*scratch_, "--model " + dir_ + " --prompt 'The small robot' --max-new-tokens 12 --no-echo");
  ASSERT_EQ(stopped.rc, 0) << stopped.err;
  EXPECT_NE(stopped.err.find("stopped at EOS"), std::string::npos) << stopped.err;
  const size_t n = size_t(std::find(greedy_.begin(), greedy_.end(), eos) - greedy_.begin());
  auto prompt = encode_prompt(tok, SpecialTokens{1, true, {}, "", ""}, "The small robot");
  auto want = decode_continuation(tok, *prompt, std::vector<int32_t>(greedy_.begin(), greedy_.begin() + ptrdiff_t(n)));
  EXPECT_EQ(stopped.out, *want + "\n");
  Result ignored =
      llm(*scratch_, "--model " + dir_ + " --prompt 'The small robot' --max-new-tokens 12 --no-echo --ignore-eos");
  ASSERT_EQ(ignored.rc, 0) << ignored.err;
  EXPECT_EQ(ignored.out, text + "\n");
  EXPECT_NE(ignored.err.find("reached --max-new-tokens"), std::string::npos) << ignored.err;
}

// Issue 33, finding 5: a 10 MB prompt line was OOM-killed while tokenizing (about 4.6 KB per
// input byte) and `--interactive < /dev/zero` grew without bound. A prompt longer than the
// model's positions could hold (64 bytes a position) is refused before tokenizing,
// and an interactive line stops at that length.
TEST_F(LlmCommandText, EndlessLinesAndHugePromptsAreRefusedBeforeTokenizing) {
  LOAD_TEST_TOKENIZER(tok);
  (void)tok;
  const std::string out = scratch_->path() + "/zero.out", err = scratch_->path() + "/zero.err";
  const std::string cmd = "timeout 120 " + std::string(TUNABLEOP_CLI) + " llm --model " + dir_ +
                          " --interactive --max-new-tokens 2 </dev/zero >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << slurp(err);
  EXPECT_EQ(WEXITSTATUS(status), 2) << slurp(err);
  EXPECT_NE(slurp(err).find("a line of standard input is longer than 16384 bytes"), std::string::npos) << slurp(err);

  std::ofstream(scratch_->path() + "/huge.txt") << std::string(size_t(1) << 20, 'a') << "\n";
  Result r = llm(*scratch_, "--model " + dir_ + " --prompt-file " + scratch_->path() + "/huge.txt");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("prompt 1 is 1048576 bytes of text; at most 16384 fit here"), std::string::npos) << r.err;
}

TEST_F(LlmCommandText, InteractiveAndPromptFile) {
  LOAD_TEST_TOKENIZER(tok);
  Result r = llm(*scratch_, "--model " + dir_ + " --interactive --max-new-tokens 6 --ignore-eos", "Hello\n\nLe café\n");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, continuation(tok, "Hello", 6) + "\n" + continuation(tok, "Le café", 6) + "\n");
  std::ofstream(scratch_->path() + "/prompts.txt") << "Hello\n\n今天\r\n";
  Result f = llm(*scratch_, "--model " + dir_ + " --prompt-file " + scratch_->path() +
                                "/prompts.txt --max-new-tokens 6 --ignore-eos");
  ASSERT_EQ(f.rc, 0) << f.err;
  EXPECT_EQ(f.out, "[1] Hello" + continuation(tok, "Hello", 6) + "\n[2] 今天" + continuation(tok, "今天", 6) + "\n");
}

TEST_F(LlmCommandText, SamplingSeedReproduces) {
  LOAD_TEST_TOKENIZER(tok);
  const std::string base = "--model " + dir_ + " --prompt Hello --max-new-tokens 16 --ignore-eos --temperature 1.2 ";
  Result a = llm(*scratch_, base + "--seed 5"), b = llm(*scratch_, base + "--seed 5"),
         c = llm(*scratch_, base + "--seed 6");
  ASSERT_EQ(a.rc, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_NE(a.err.find("temperature 1.2, top-k 0, top-p 1, seed 5"), std::string::npos) << a.err;
  // --top-k 1 samples the greedy token whatever the temperature.
  Result k1 = llm(*scratch_, "--model " + dir_ + " --prompt Hello --max-new-tokens 8 --ignore-eos --top-k 1");
  ASSERT_EQ(k1.rc, 0) << k1.err;
  EXPECT_EQ(k1.out, "Hello" + continuation(tok, "Hello", 8) + "\n");
}

TEST_F(LlmCommandText, BenchModeTakesATextPrompt) {
  LOAD_TEST_TOKENIZER(tok);
  Result r =
      llm(*scratch_, "--model " + dir_ +
                         " --mode bench --prompt 'Hello Earthlings!' --max-new-tokens 6 --iterations 1 --warmup 0");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Tokens/second"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Text: " + continuation(tok, "Hello Earthlings!", 6) + "\n"), std::string::npos) << r.out;
}

TEST_F(LlmCommandText, WithoutATokenizerIdsStillWork) {
  ScratchDir s("cli_no_tok");
  testing::write_text_model(s.path(), /*with_tokenizer=*/false);
  Result text = llm(*scratch_, "--model " + s.path() + " --prompt Hello");
  EXPECT_NE(text.rc, 0);
  EXPECT_NE(text.err.find(s.path() + ": has neither tokenizer.json nor tokenizer.model"), std::string::npos)
      << text.err;
  EXPECT_NE(text.err.find("--prompt-ids"), std::string::npos) << text.err;
  Result bench = llm(*scratch_, "--model " + s.path() + " --prompt-ids 1,5,7 --max-new-tokens 4 --iterations 1");
  ASSERT_EQ(bench.rc, 0) << bench.err;
  EXPECT_NE(bench.out.find("Tokens/second"), std::string::npos);
  Result gen = llm(*scratch_, "--model " + s.path() + " --mode generate --prompt-ids 1,5,7 --max-new-tokens 5");
  ASSERT_EQ(gen.rc, 0) << gen.err;
  auto e = testing::text_engine();
  auto g = generate(*e.engine, {{1, 5, 7}}, 5);
  ASSERT_TRUE(g.is_ok());
  // Greedy ids, cut after an EOS (2) if one comes.
  std::vector<int32_t> want;
  for (int32_t t : g->tokens[0]) {
    want.push_back(t);
    if (t == 2) break;
  }
  std::string want_line;
  for (int32_t t : want) want_line += (want_line.empty() ? "" : ",") + std::to_string(t);
  EXPECT_EQ(gen.out, want_line + "\n");
}

TEST_F(LlmCommandText, OptionsOfTheOtherModeAreRefused) {
  struct Case {
    std::string args, message;
    bool after_tokenizer = false;  // checked once the prompts are encoded (needs SentencePiece)
  };
  const std::vector<Case> cases = {
      {"--model builtin:tiny --prompt Hello", "has no tokenizer"},
      {"--prompt-ids 1,2 --temperature 0.7", "--temperature applies to generation"},
      {"--prompt-ids 1,2 --seed 3", "--model-seed"},
      {"--prompt-ids 1,2 --ignore-eos", "--ignore-eos"},
      {"--model " + dir_ + " --prompt Hello --compare", "--mode bench"},
      {"--model " + dir_ + " --interactive --prompt Hello", "standard input"},
      {"--model " + dir_ + " --prompt Hello --prompt-ids 1,2", "not both"},
      {"--model " + dir_ + " --mode bench --interactive", "--interactive"},
      {"--model " + dir_ + " --prompt a --prompt b --batch 3", "--batch 3 but 2 prompts", true},
      {"--model " + dir_ + " --prompt a --temperature 0 --top-k 4", "--temperature 0 is greedy"},
      {"--model " + dir_ + " --prompt a --top-p 1.5", "top-p must be in (0, 1]", true},
      {"--model " + dir_ + " --prompt-file /nonexistent/prompts.txt", "/nonexistent/prompts.txt"},
      {"--model " + dir_ + " --prompt Hello --profile-decode 2", "--mode bench"},
      {"--model " + dir_ + " --prompt Hello --measure-bandwidth", "--mode bench"},
      {"--model " + dir_ + " --prompt Hello --profile-prefill 1", "--mode bench"},
      {"--prompt-ids 1,2 --fusion sometimes", "--fusion"},
  };
  for (const auto& c : cases) {
    Result r = llm(*scratch_, c.args);
    EXPECT_GT(r.rc, 0) << c.args;
    EXPECT_LT(r.rc, 128) << c.args;
    if (c.after_tokenizer && !tokenizer_available()) continue;  // refused earlier, for want of SentencePiece
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
}

// After a benchmark, --profile-decode prints where a decode step's time goes, kernel by kernel,
// at the benchmark's mean position (issue 13), and the TPOT line gives tokens/s in total.
TEST_F(LlmCommandText, ProfileDecodeAfterABenchmark) {
  Result r = llm(*scratch_,
                 "--model builtin:tiny --layers 1 --total-tokens 24 --iterations 1 --warmup 0 --no-tune "
                 "--batch 2 --profile-decode 2");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("in total over the batch of 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Decode step breakdown"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("at position 11"), std::string::npos) << r.out;  // prompt 3 + 16 new / 2
  for (const char* kernel : {"qkv.gemm *", "attention", "gate_up.act", "lm_head.argmax", "matmul kernels (*)"}) {
    EXPECT_NE(r.out.find(kernel), std::string::npos) << kernel << "\n" << r.out;
  }
}

// After a benchmark, --profile-prefill prints where a prefill's time goes, kernel by kernel, with
// the GEMMs' and attention's rates and the TTFT against the kernels' sum (issue 12).
TEST_F(LlmCommandText, ProfilePrefillAfterABenchmark) {
  Result r = llm(*scratch_,
                 "--model builtin:tiny --layers 1 --prompt-len 20 --max-new-tokens 2 --iterations 1 --warmup 0 "
                 "--no-tune --profile-prefill 2");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Prefill breakdown (eager, one event per kernel, mean of 2 prefills)"), std::string::npos)
      << r.out;
  for (const char* kernel : {"qkv.gemm *", "attention", "gather_rows", "lm_head.gemm *", "TTFT as benchmarked"}) {
    EXPECT_NE(r.out.find(kernel), std::string::npos) << kernel << "\n" << r.out;
  }
  Result j = llm(*scratch_,
                 "--model builtin:tiny --layers 1 --prompt-len 20 --max-new-tokens 2 --iterations 1 --warmup 0 "
                 "--no-tune --profile-prefill 1 --json");
  ASSERT_EQ(j.rc, 0) << j.err;
  EXPECT_NE(j.out.find("\"prefill_profile\""), std::string::npos) << j.out;
}

}  // namespace
}  // namespace tunableop::llm
