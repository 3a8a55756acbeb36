// Generation that stops, on the CPU engine with a tiny random Llama: greedy equals the
// benchmark's generate(), top-k = 1 sampling equals greedy, a seed reproduces its tokens and
// another seed changes them, EOS stops a sequence (and --ignore-eos does not), a batch of
// different prompts equals the prompts run alone, and the cache limit is checked.
#include "llm/text/generation_loop.h"

#include <gtest/gtest.h>

#include "llm/generate.h"
#include "text_test_util.h"

namespace tunableop::llm {
namespace {

using testing::text_engine;

const std::vector<int32_t> kPrompt = {1, 306, 381, 307, 285};
const std::vector<int32_t> kOtherPrompt = {1, 283, 310, 354, 289, 394, 292, 365, 312, 261, 405};

std::vector<int32_t> greedy_reference(const std::vector<int32_t>& prompt, int64_t n) {
  auto e = text_engine();
  auto g = generate(*e.engine, {prompt}, n);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  return g.is_ok() ? g->tokens[0] : std::vector<int32_t>{};
}

StoppedGeneration run(const std::vector<std::vector<int32_t>>& prompts, const SamplingOptions& s, StopOptions stop,
                      const TokenCallback& cb = {}) {
  auto e = text_engine(int64_t(prompts.size()));
  auto selector = make_token_selector(s);
  auto g = generate_until_stop(*e.engine, prompts, stop, *selector, cb);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  return g.is_ok() ? *g : StoppedGeneration{};
}

SamplingOptions sampled(uint64_t seed, int64_t top_k = 0, double temperature = 1.0) {
  SamplingOptions s;
  s.temperature = temperature;
  s.top_k = top_k;
  s.seed = seed;
  return s;
}

TEST(GenerationLoop, GreedyEqualsTheBenchmarkGeneration) {
  const auto want = greedy_reference(kPrompt, 20);
  std::vector<int32_t> streamed;
  auto g = run({kPrompt}, SamplingOptions{}, {20, {}, false}, [&](size_t b, int32_t t) {
    EXPECT_EQ(b, 0u);
    streamed.push_back(t);
    return Status::ok();
  });
  ASSERT_EQ(g.sequences.size(), 1u);
  EXPECT_EQ(g.sequences[0].tokens, want);
  EXPECT_EQ(streamed, want);
  EXPECT_FALSE(g.sequences[0].stopped_at_eos);
  EXPECT_EQ(g.steps, 19);
}

TEST(GenerationLoop, TopKOneSamplingEqualsGreedy) {
  const auto want = greedy_reference(kPrompt, 16);
  for (double t : {0.3, 1.0, 5.0}) {
    auto g = run({kPrompt}, sampled(7, 1, t), {16, {}, false});
    EXPECT_EQ(g.sequences[0].tokens, want) << "temperature " << t;
  }
}

TEST(GenerationLoop, SamplingIsReproducibleBySeedAndDiffersAcrossSeeds) {
  auto a = run({kPrompt}, sampled(1234), {24, {}, false});
  auto b = run({kPrompt}, sampled(1234), {24, {}, false});
  auto c = run({kPrompt}, sampled(1235), {24, {}, false});
  EXPECT_EQ(a.sequences[0].tokens, b.sequences[0].tokens);
  EXPECT_NE(a.sequences[0].tokens, c.sequences[0].tokens);
  EXPECT_NE(a.sequences[0].tokens, greedy_reference(kPrompt, 24));
}

TEST(GenerationLoop, EosStopsGenerationAndIgnoreEosDoesNot) {
  const auto greedy = greedy_reference(kPrompt, 16);
  // Make the 6th greedy token the EOS: generation must stop right after it, EOS kept.
  const int32_t eos = greedy[5];
  const size_t first = size_t(std::find(greedy.begin(), greedy.end(), eos) - greedy.begin());
  auto g = run({kPrompt}, SamplingOptions{}, {16, {99999, eos}, false});
  EXPECT_EQ(g.sequences[0].tokens, std::vector<int32_t>(greedy.begin(), greedy.begin() + ptrdiff_t(first) + 1));
  EXPECT_TRUE(g.sequences[0].stopped_at_eos);
  auto ignored = run({kPrompt}, SamplingOptions{}, {16, {eos}, true});
  EXPECT_EQ(ignored.sequences[0].tokens, greedy);
  EXPECT_FALSE(ignored.sequences[0].stopped_at_eos);
}

TEST(GenerationLoop, BatchOfDifferentPromptsEqualsEachAlone) {
  const auto a = greedy_reference(kPrompt, 12);
  const auto b = greedy_reference(kOtherPrompt, 12);
  // The second sequence stops early at its own 3rd token; the first must not notice.
  const int32_t eos = b[2];
  const bool eos_in_a = std::find(a.begin(), a.end(), eos) != a.end();
  std::vector<std::vector<int32_t>> seen(2);
  auto g = run({kPrompt, kOtherPrompt}, SamplingOptions{}, {12, {eos}, false}, [&](size_t s, int32_t t) {
    seen[s].push_back(t);
    return Status::ok();
  });
  ASSERT_EQ(g.sequences.size(), 2u);
  const size_t b_stop = size_t(std::find(b.begin(), b.end(), eos) - b.begin()) + 1;
  EXPECT_EQ(g.sequences[1].tokens, std::vector<int32_t>(b.begin(), b.begin() + ptrdiff_t(b_stop)));
  if (!eos_in_a) {
    EXPECT_EQ(g.sequences[0].tokens, a);
  }
  EXPECT_EQ(seen[0], g.sequences[0].tokens);
  EXPECT_EQ(seen[1], g.sequences[1].tokens);
}

TEST(GenerationLoop, SampledBatchSequencesMatchTheirSoloStreams) {
  // Sequence 0 of a batch and a batch of one draw from the same stream: same tokens.
  auto solo = run({kPrompt}, sampled(77), {10, {}, false});
  auto batch = run({kPrompt, kOtherPrompt}, sampled(77), {10, {}, false});
  EXPECT_EQ(batch.sequences[0].tokens, solo.sequences[0].tokens);
}

TEST(GenerationLoop, ChecksTheCacheAndTheCallback) {
  auto e = text_engine(1, 16);
  auto selector = make_token_selector(SamplingOptions{});
  auto fit = max_new_tokens_that_fit(*e.engine, {kPrompt});
  ASSERT_TRUE(fit.is_ok());
  EXPECT_EQ(*fit, 16 - int64_t(kPrompt.size()) + 1);
  auto g = generate_until_stop(*e.engine, {kPrompt}, {*fit, {}, false}, *selector);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(int64_t(g->sequences[0].tokens.size()), *fit);
  auto over = generate_until_stop(*e.engine, {kPrompt}, {*fit + 1, {}, false}, *selector);
  ASSERT_FALSE(over.is_ok());
  EXPECT_NE(over.status().message().find("KV cache"), std::string::npos) << over.status().message();
  std::vector<int32_t> long_prompt(17, 5);
  EXPECT_FALSE(max_new_tokens_that_fit(*e.engine, {long_prompt}).is_ok());
  EXPECT_FALSE(generate_until_stop(*e.engine, {kPrompt}, {0, {}, false}, *selector).is_ok());
  int calls = 0;
  auto stopped = generate_until_stop(*e.engine, {kPrompt}, {8, {}, false}, *selector, [&](size_t, int32_t) {
    return ++calls == 3 ? Status::io_error("stdout closed") : Status::ok();
  });
  ASSERT_FALSE(stopped.is_ok());
  EXPECT_EQ(stopped.status().code(), StatusCode::kIoError);
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace tunableop::llm
