// Text in, text out on a tiny Llama whose vocabulary is the test tokenizer's: the printed
// continuation is the greedy ids decoded, streamed or batched, interactive lines answered one by
// one, EOS stops an answer. Plus the Hugging Face reference (scripts/make_llm_text_fixture.py):
// prompt ids, greedy ids and decoded text as transformers and SentencePiece's Python module
// give them.
#include "llm/text/text_session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "llm/generate.h"
#include "llm/text/text_stream.h"
#include "llm/weights.h"
#include "text_test_util.h"

namespace tunableop::llm {
namespace {

using testing::text_engine;

SpecialTokens llama_special(std::vector<int32_t> eos = {2}) {
  SpecialTokens s;
  s.bos = 1;
  s.eos = std::move(eos);
  return s;
}

std::vector<int32_t> greedy_ids(Engine& engine, const std::vector<int32_t>& prompt, int64_t n) {
  auto g = generate(engine, {prompt}, n);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  return g.is_ok() ? g->tokens[0] : std::vector<int32_t>{};
}

// What the session must print for one prompt: the prompt, then the greedy continuation's text.
std::string expected_answer(const Tokenizer& tok, const std::string& prompt, int64_t n, bool echo = true) {
  auto e = text_engine();
  auto ids = encode_prompt(tok, llama_special(), prompt);
  EXPECT_TRUE(ids.is_ok());
  auto text = decode_continuation(tok, *ids, greedy_ids(*e.engine, *ids, n));
  EXPECT_TRUE(text.is_ok());
  return (echo ? prompt : "") + *text;
}

TextOptions greedy_options(int64_t n) {
  TextOptions o;
  o.max_new_tokens = n;
  o.ignore_eos = true;  // fixed lengths, to compare with generate()
  o.stats = false;
  return o;
}

TEST(TextSession, OnePromptStreamsTheGreedyContinuation) {
  LOAD_TEST_TOKENIZER(tok);
  auto e = text_engine();
  std::ostringstream out, err;
  TextOptions o = greedy_options(12);
  o.print_ids = true;
  TextSession session(*e.engine, tok, llama_special(), o, out, err);
  ASSERT_TRUE(session.run({"Hello Earthlings!"}).is_ok());
  ASSERT_EQ(session.answers().size(), 1u);
  const TextAnswer& a = session.answers()[0];
  auto prompt = encode_prompt(tok, llama_special(), "Hello Earthlings!");
  EXPECT_EQ(a.prompt_ids, *prompt);
  EXPECT_EQ(a.prompt_ids.front(), 1);  // BOS
  auto ref = text_engine();
  EXPECT_EQ(a.ids, greedy_ids(*ref.engine, *prompt, 12));
  std::string ids;
  for (int32_t t : a.ids) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  EXPECT_EQ(out.str(), expected_answer(tok, "Hello Earthlings!", 12) + "\nids: " + ids + "\n");
  EXPECT_EQ(err.str(), "");
}

TEST(TextSession, BatchOfDifferentPromptsPrintsEachAnswer) {
  LOAD_TEST_TOKENIZER(tok);
  const std::vector<std::string> prompts = {"The small robot", "今天", "Rocket 🚀 to"};
  auto e = text_engine(3);
  std::ostringstream out, err;
  TextSession session(*e.engine, tok, llama_special(), greedy_options(10), out, err);
  ASSERT_TRUE(session.run(prompts).is_ok());
  std::string want;
  for (size_t i = 0; i < prompts.size(); ++i) {
    want += '[' + std::to_string(i + 1);
    want += "] " + expected_answer(tok, prompts[i], 10) + "\n";
  }
  EXPECT_EQ(out.str(), want);
}

TEST(TextSession, InteractiveAnswersLineByLineUntilEof) {
  LOAD_TEST_TOKENIZER(tok);
  auto e = text_engine(1, 64);
  std::istringstream in("Hello\n\nLe café\r\n" + std::string(70, 'x') + "\nlast line without newline");
  std::ostringstream out, err;
  TextSession session(*e.engine, tok, llama_special(), greedy_options(6), out, err);
  ASSERT_TRUE(session.interactive(in).is_ok());
  // No echo; the over-long line is an error on the error stream, and the session goes on.
  EXPECT_EQ(out.str(), expected_answer(tok, "Hello", 6, false) + "\n" + expected_answer(tok, "Le café", 6, false) +
                           "\n" + expected_answer(tok, "last line without newline", 6, false) + "\n");
  EXPECT_NE(err.str().find("does not fit the KV cache"), std::string::npos) << err.str();
}

TEST(TextSession, InteractiveCutsAnswersAtTheCacheAndSaysSo) {
  LOAD_TEST_TOKENIZER(tok);
  auto e = text_engine(1, 16);
  std::istringstream in("Hello\n");
  std::ostringstream out, err;
  TextOptions o = greedy_options(100);
  o.stats = true;
  TextSession session(*e.engine, tok, llama_special(), o, out, err);
  ASSERT_TRUE(session.interactive(in).is_ok());
  ASSERT_EQ(session.answers().size(), 1u);
  EXPECT_EQ(session.answers()[0].prompt_ids.size() + session.answers()[0].ids.size(), 17u);
  EXPECT_NE(err.str().find("KV cache holds 16 positions"), std::string::npos) << err.str();
}

TEST(TextSession, EosEndsTheAnswer) {
  LOAD_TEST_TOKENIZER(tok);
  auto prompt = encode_prompt(tok, llama_special(), "The small robot");
  auto ref = text_engine();
  const auto greedy = greedy_ids(*ref.engine, *prompt, 12);
  const int32_t eos = greedy[4];
  const size_t stop = size_t(std::find(greedy.begin(), greedy.end(), eos) - greedy.begin());
  auto e = text_engine();
  std::ostringstream out, err;
  TextOptions o = greedy_options(12);
  o.ignore_eos = false;
  o.echo_prompt = false;
  o.stats = true;
  TextSession session(*e.engine, tok, llama_special({eos}), o, out, err);
  ASSERT_TRUE(session.run({"The small robot"}).is_ok());
  const TextAnswer& a = session.answers()[0];
  EXPECT_TRUE(a.stopped_at_eos);
  EXPECT_EQ(a.ids, std::vector<int32_t>(greedy.begin(), greedy.begin() + ptrdiff_t(stop) + 1));
  // The EOS itself is not printed.
  auto text = decode_continuation(tok, *prompt, std::vector<int32_t>(greedy.begin(), greedy.begin() + ptrdiff_t(stop)));
  EXPECT_EQ(out.str(), *text + "\n");
  EXPECT_NE(err.str().find("stopped at EOS"), std::string::npos) << err.str();
}

TEST(TextSession, SamplingIsReproducibleAcrossSessions) {
  LOAD_TEST_TOKENIZER(tok);
  auto answer = [&](uint64_t seed) {
    auto e = text_engine();
    std::ostringstream out, err;
    TextOptions o = greedy_options(16);
    o.sampling.temperature = 1.0;
    o.sampling.seed = seed;
    TextSession session(*e.engine, tok, llama_special(), o, out, err);
    EXPECT_TRUE(session.run({"Hello"}).is_ok());
    return out.str();
  };
  EXPECT_EQ(answer(5), answer(5));
  EXPECT_NE(answer(5), answer(6));
}

// The Hugging Face reference, when its fixture is committed: the same tokenizer and a tiny
// Llama built and run by transformers (fp32, greedy, full forward passes).
std::string hf_text_fixture() { return testing::source_dir() + "/tests/fixtures/llm/llama_spm"; }

#define LOAD_HF_TEXT_REFERENCE(ref)                                                                                 \
  const std::string ref##_path = hf_text_fixture() + "/reference_text.json";                                        \
  if (!std::filesystem::exists(ref##_path)) {                                                                       \
    GTEST_SKIP() << ref##_path                                                                                      \
                 << " is missing: run `python3 scripts/make_llm_text_fixture.py --out tests/fixtures/llm` on a "    \
                    "machine with torch, transformers and sentencepiece, then commit tests/fixtures/llm/llama_spm"; \
  }                                                                                                                 \
  std::ifstream ref##_in(ref##_path);                                                                               \
  const nlohmann::json ref = nlohmann::json::parse(ref##_in);                                                       \
  ASSERT_GE(ref["cases"].size(), 3u)

// Ids only: no tokenizer needed, so this runs in builds without SentencePiece too.
TEST(TextSession, GreedyIdsMatchHuggingFace) {
  LOAD_HF_TEXT_REFERENCE(ref);
  auto weights = load_model(hf_text_fixture());
  ASSERT_TRUE(weights.is_ok()) << weights.status().to_string();
  auto shared = std::make_shared<const ModelWeights>(std::move(weights.value()));
  for (const auto& c : ref["cases"]) {
    Context ctx(Device::cpu(), Config::defaults_only());
    auto engine = make_cpu_engine(shared, testing::options(1, 96, 8), tunableop_linear(ctx), tunableop_gemm(ctx));
    ASSERT_TRUE(engine.is_ok());
    const auto want = c["greedy_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(greedy_ids(**engine, c["prompt_ids"].get<std::vector<int32_t>>(), int64_t(want.size())), want)
        << c["prompt"];
  }
}

TEST(TextSession, TextMatchesHuggingFace) {
  LOAD_HF_TEXT_REFERENCE(ref);
  if (!tokenizer_available()) GTEST_SKIP() << "this build has no SentencePiece";
  const std::string dir = hf_text_fixture();
  auto tok = load_tokenizer(dir);
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  auto special = load_special_tokens(dir, tok->get());
  ASSERT_TRUE(special.is_ok()) << special.status().to_string();
  EXPECT_EQ(special->bos_source, "tokenizer_config.json");
  auto weights = load_model(dir);
  ASSERT_TRUE(weights.is_ok()) << weights.status().to_string();
  auto shared = std::make_shared<const ModelWeights>(std::move(weights.value()));
  for (const auto& c : ref["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    const auto want_ids = c["greedy_ids"].get<std::vector<int32_t>>();
    auto ids = encode_prompt(**tok, *special, prompt);
    ASSERT_TRUE(ids.is_ok());
    EXPECT_EQ(*ids, c["prompt_ids"].get<std::vector<int32_t>>()) << prompt;
    if (c.contains("hf_tokenizer_ids")) {  // transformers' tokenizer, when it loaded offline
      EXPECT_EQ(*ids, c["hf_tokenizer_ids"].get<std::vector<int32_t>>()) << prompt;
    }
    auto text = (*tok)->decode(want_ids);
    ASSERT_TRUE(text.is_ok());
    EXPECT_EQ(*text, c["greedy_text"].get<std::string>()) << prompt;

    Context ctx(Device::cpu(), Config::defaults_only());
    auto engine = make_cpu_engine(shared, testing::options(1, 96, 8), tunableop_linear(ctx), tunableop_gemm(ctx));
    ASSERT_TRUE(engine.is_ok());
    std::ostringstream out, err;
    TextOptions o = greedy_options(int64_t(want_ids.size()));
    o.echo_prompt = false;
    TextSession session(**engine, **tok, *special, o, out, err);
    ASSERT_TRUE(session.run({prompt}).is_ok());
    EXPECT_EQ(session.answers()[0].ids, want_ids) << prompt;
    EXPECT_EQ(session.answers()[0].text, c["continuation_text"].get<std::string>()) << prompt;
    EXPECT_EQ(out.str(), c["continuation_text"].get<std::string>() + "\n") << prompt;
  }
}

}  // namespace
}  // namespace tunableop::llm
