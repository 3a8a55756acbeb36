// The CPU engine end to end: against the fp64 reference forward pass, padding and batching
// invariance, the distinct-GEMM count, tuning through the context's results file, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include "llm/attention_gemms.h"
#include "llm/engine.h"
#include "llm/generate.h"
#include "llm_test_util.h"
#include "naive_model.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

using testing::ScratchDir;

// Tuning off, no results file: every GEMM runs Default through tunableop::linear.
std::unique_ptr<Context> default_only_context() {
  return std::make_unique<Context>(Device::cpu(), Config::defaults_only());
}

std::unique_ptr<Engine> make_engine(const ModelConfig& c, Context& ctx, EngineOptions o = {}, uint64_t seed = 1) {
  auto w = std::make_shared<const ModelWeights>(make_random_weights(c, seed));
  auto e = make_cpu_engine(w, o, tunableop_linear(ctx), tunableop_gemm(ctx));
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return std::move(e.value());
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// Greedy generation on the engine; at every step the engine's logits and token must agree with
// the fp64 reference run over the whole sequence so far.
// `gemm_attention`: prefill attention through tunableop::gemm (the engine's path) or the
// attention kernel (decode's, and the fallback).
void check_against_reference(const ModelConfig& c, const std::vector<int32_t>& prompt, int steps, int64_t pad,
                             bool gemm_attention = true) {
  auto ctx = default_only_context();
  auto weights = std::make_shared<const ModelWeights>(make_random_weights(c, 42));
  auto engine = make_cpu_engine(weights, testing::options(1, 48, pad), tunableop_linear(*ctx),
                                gemm_attention ? tunableop_gemm(*ctx) : LinearOp::GemmFn{});
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  Engine& e = **engine;
  std::vector<int32_t> seq = prompt, next;
  ASSERT_TRUE(e.prefill({prompt}, &next).is_ok());
  for (int s = 0; s < steps; ++s) {
    std::vector<double> ref_all = testing::naive_logits(*weights, seq);
    std::vector<double> ref(ref_all.end() - c.vocab_size, ref_all.end());
    std::vector<float> got;
    ASSERT_TRUE(e.last_logits(&got).is_ok());
    ASSERT_EQ(got.size(), size_t(c.vocab_size));
    const double tol = 1e-4 * std::max(1.0, max_abs(ref));
    int32_t ref_best = int32_t(std::max_element(ref.begin(), ref.end()) - ref.begin());
    for (int64_t i = 0; i < c.vocab_size; ++i) {
      ASSERT_NEAR(got[size_t(i)], ref[size_t(i)], tol) << "step " << s << " logit " << i;
    }
    ASSERT_EQ(next[0], ref_best) << "step " << s;
    seq.push_back(next[0]);
    if (s + 1 < steps) {
      ASSERT_TRUE(e.decode({next[0]}, &next).is_ok());
    }
  }
}

TEST(LlmEngine, LlamaGqaMatchesFp64Reference) { check_against_reference(testing::small_llama(), {5, 17, 3}, 8, 8); }
TEST(LlmEngine, GemmaMqaMatchesFp64Reference) {
  check_against_reference(testing::small_gemma(), {1, 2, 60, 7, 7}, 8, 8);
}
TEST(LlmEngine, UnpaddedMatchesFp64Reference) { check_against_reference(testing::small_llama(), {9, 4, 4, 80}, 6, 1); }
TEST(LlmEngine, KernelPrefillAttentionMatchesFp64Reference) {
  check_against_reference(testing::small_llama(), {5, 17, 3, 1, 1}, 4, 8, false);
  check_against_reference(testing::small_gemma(), {5, 17, 3, 1, 1}, 4, 8, false);
}

TEST(LlmEngine, PaddingDoesNotChangeTheResult) {
  auto ctx = default_only_context();
  for (const ModelConfig& c : {testing::small_llama(), testing::small_gemma()}) {
    std::vector<std::vector<float>> logits;
    std::vector<std::vector<int32_t>> tokens;
    for (int64_t pad : {1, 5, 8, 16}) {
      auto e = make_engine(c, *ctx, testing::options(1, 48, pad));
      auto g = generate(*e, {{3, 1, 4, 1, 5, 9, 2}}, 10);
      ASSERT_TRUE(g.is_ok()) << g.status().to_string();
      EXPECT_EQ(e->padded_prompt_length(), round_up(7, pad));
      std::vector<float> l;
      ASSERT_TRUE(e->last_logits(&l).is_ok());
      logits.push_back(l);
      tokens.push_back(g->tokens[0]);
    }
    for (size_t i = 1; i < tokens.size(); ++i) {
      EXPECT_EQ(tokens[i], tokens[0]);
      for (size_t j = 0; j < logits[0].size(); ++j) ASSERT_NEAR(logits[i][j], logits[0][j], 1e-4);
    }
  }
}

TEST(LlmEngine, BatchOfDifferentLengthsEqualsSingleRuns) {
  auto ctx = default_only_context();
  const ModelConfig c = testing::small_llama();
  const std::vector<std::vector<int32_t>> prompts = {{7, 8, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {42}};
  auto batched = make_engine(c, *ctx, testing::options(3, 48, 8));
  auto gb = generate(*batched, prompts, 9);
  ASSERT_TRUE(gb.is_ok()) << gb.status().to_string();
  EXPECT_EQ(batched->padded_prompt_length(), 16);
  EXPECT_EQ(batched->sequence_lengths(), (std::vector<int64_t>{3 + 8, 10 + 8, 1 + 8}));
  std::vector<float> lb;
  ASSERT_TRUE(batched->last_logits(&lb).is_ok());
  for (size_t b = 0; b < prompts.size(); ++b) {
    auto single = make_engine(c, *ctx, testing::options(1, 48, 8));
    auto gs = generate(*single, {prompts[b]}, 9);
    ASSERT_TRUE(gs.is_ok());
    EXPECT_EQ(gb->tokens[b], gs->tokens[0]) << "sequence " << b;
    std::vector<float> ls;
    ASSERT_TRUE(single->last_logits(&ls).is_ok());
    for (int64_t i = 0; i < c.vocab_size; ++i)
      ASSERT_NEAR(lb[size_t(int64_t(b) * c.vocab_size + i)], ls[size_t(i)], 1e-4);
  }
}

// Seed Example 2's point: a static cache and padded prompts leave few GEMM shapes. Per layer
// 4 GEMMs (qkv, o, gate_up, down) at prompt rows and at batch rows, the two prefill attention
// GEMMs, and lm_head at batch rows.
TEST(LlmEngine, CountsDistinctGemmProblems) {
  auto ctx = default_only_context();
  const ModelConfig c = testing::small_llama();
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  auto e = make_engine(c, *ctx, testing::options(2, 48, 8));
  // Two prompt lengths padding to the same 8: the same problems again.
  for (auto prompt : {std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{4, 5, 6, 7, 8, 9}}) {
    auto g = generate(*e, {prompt, prompt}, 6);
    ASSERT_TRUE(g.is_ok());
  }
  std::set<std::string> expected;
  for (int64_t rows : {int64_t(16), int64_t(2)}) {
    for (auto [in, out] : {std::pair{H, c.qkv_dim()}, {c.q_dim(), H}, {H, 2 * I}, {I, H}}) {
      expected.insert(gemm_params_signature(linear_params(DType::kF32, rows, in, out)));
    }
  }
  expected.insert(gemm_params_signature(linear_params(DType::kF32, 2, H, c.vocab_size)));
  const AttentionGemms att = prefill_attention_gemms(c, DType::kF32, 2, 8, 48);
  expected.insert(gemm_params_signature(att.scores.with_defaults()));
  expected.insert(gemm_params_signature(att.output.with_defaults()));
  std::set<std::string> got;
  int prefill = 0, decode = 0;
  for (const auto& p : e->linear().problems()) {
    got.insert(p.params);
    prefill += p.in_prefill;
    decode += p.in_decode;
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(got.size(), 11u);
  EXPECT_EQ(prefill, 7);  // 4 at 16 rows + 2 attention + lm_head at 2 rows
  EXPECT_EQ(decode, 5);
  // 2 runs x (prefill: 6 per layer x 2 layers + lm_head; 5 decode steps: 4 x 2 + lm_head)
  EXPECT_EQ(e->linear().calls(), 2 * ((6 * 2 + 1) + 5 * (4 * 2 + 1)));
}

int count_result_lines(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.rfind("GemmTunableOp", 0) == 0;
  return n;
}

TEST(LlmEngine, TunesEachProblemOnceAndReusesTheResultsFile) {
  ScratchDir dir("tuned");
  const std::string file = dir.path() + "/results.csv";
  auto tuned_context = [&] {
    Config cfg = Config::defaults_only();
    EXPECT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
    EXPECT_TRUE(cfg.set(Setting::kTuning, true).is_ok());
    EXPECT_TRUE(cfg.set(Setting::kFilename, file.c_str()).is_ok());
    // Tiny budgets: this checks the plumbing, not the choice.
    EXPECT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, int64_t(1)).is_ok());
    EXPECT_TRUE(cfg.set(Setting::kMaxWarmupDurationMs, int64_t(1)).is_ok());
    EXPECT_TRUE(cfg.set(Setting::kMaxTuningIterations, int64_t(2)).is_ok());
    EXPECT_TRUE(cfg.set(Setting::kMaxWarmupIterations, int64_t(1)).is_ok());
    EXPECT_TRUE(cfg.set(Setting::kRotatingBufferSize, int64_t(0)).is_ok());
    return std::make_unique<Context>(Device::cpu(), std::move(cfg));
  };
  const ModelConfig c = testing::small_gemma();
  std::vector<int32_t> tokens_first;
  std::string results_path;
  {
    auto ctx = tuned_context();
    auto e = make_engine(c, *ctx, testing::options(1, 48, 8));
    auto g = generate(*e, {{1, 2, 3}}, 5);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    tokens_first = g->tokens[0];
    EXPECT_EQ(ctx->results().size(), e->linear().problems().size());
    results_path = ctx->results_path();  // the %d rule inserts the device ordinal
    EXPECT_EQ(count_result_lines(results_path), int(e->linear().problems().size()));
  }
  {
    auto ctx = tuned_context();
    auto e = make_engine(c, *ctx, testing::options(1, 48, 8));
    auto g = generate(*e, {{3, 2, 1, 0, 1, 2}}, 5);  // another prompt, same padded length
    ASSERT_TRUE(g.is_ok());
    EXPECT_EQ(ctx->results_path(), results_path);
    EXPECT_EQ(count_result_lines(results_path), int(e->linear().problems().size())) << "nothing re-tuned";
  }
  // Untuned (Default everywhere) gives the same tokens as tuned: candidates are all correct.
  auto ctx = default_only_context();
  auto e = make_engine(c, *ctx, testing::options(1, 48, 8));
  auto g = generate(*e, {{1, 2, 3}}, 5);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(g->tokens[0], tokens_first);
}

TEST(LlmEngine, RejectsBadRequests) {
  auto ctx = default_only_context();
  auto e = make_engine(testing::small_llama(), *ctx, testing::options(2, 16, 8));
  std::vector<int32_t> next;
  EXPECT_FALSE(e->decode({1}, &next).is_ok());                             // before prefill
  EXPECT_FALSE(e->prefill({}, &next).is_ok());                             // no prompt
  EXPECT_FALSE(e->prefill({{1}, {2}, {3}}, &next).is_ok());                // batch > max
  EXPECT_FALSE(e->prefill({{1, 97}}, &next).is_ok());                      // id >= vocab
  EXPECT_FALSE(e->prefill({{-1}}, &next).is_ok());                         // negative id
  EXPECT_FALSE(e->prefill({std::vector<int32_t>(17, 1)}, &next).is_ok());  // longer than the cache
  EXPECT_TRUE(e->prefill({std::vector<int32_t>(9, 1)}, &next).is_ok());    // 9 -> 16 fits exactly
}

TEST(LlmEngine, GenerateChecksCacheRoom) {
  auto ctx = default_only_context();
  auto e = make_engine(testing::small_llama(), *ctx, testing::options(1, 16, 8));
  EXPECT_TRUE(generate(*e, {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}, 7).is_ok());  // 10 + 6 decode = 16
  auto g = generate(*e, {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}, 8);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("KV cache"), std::string::npos);
}

TEST(LlmEngine, BenchmarkReportsConsistentMetrics) {
  auto ctx = default_only_context();
  auto e = make_engine(testing::small_gemma(), *ctx, testing::options(2, 48, 8));
  auto r = run_benchmark(*e, {{1, 2, 3}, {1, 2, 3}}, {6, 2, 1});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->generated_tokens, 2 * 2 * 6);
  EXPECT_GT(r->tokens_per_s, 0);
  EXPECT_NEAR(r->latency_ms, r->ttft_ms + r->tpot_ms * 5, 1e-9);
  EXPECT_EQ(r->first_sequence.size(), 6u);
  EXPECT_EQ(r->gemm_problems.size(), 11u);
  // Prefill GEMM work: 2 x (non-embedding weights) x 8 padded rows x 2 sequences, plus the two
  // attention GEMMs per layer (2 x 8 x 8 x head_dim x heads each), plus lm_head at 2 rows.
  const ModelConfig c = testing::small_gemma();
  const double weights =
      double(c.parameter_count() - c.vocab_size * c.hidden_size - c.hidden_size - c.num_layers * 2 * c.hidden_size);
  const double attention = 2.0 * c.num_layers * 2 * (2.0 * 8 * 8 * c.head_dim * c.num_heads);
  const double head = 2.0 * 2 * c.hidden_size * c.vocab_size;
  EXPECT_NEAR(r->prefill_gflop * 1e9, 2.0 * weights * 16 + attention + head, 1.0);
  EXPECT_EQ(r->weight_bytes, c.parameter_count() * 4);
  EXPECT_NE(format_report(*r).find("Tokens/second: "), std::string::npos);
  EXPECT_NE(report_json(*r).find("\"tokens_per_s\""), std::string::npos);
}

}  // namespace
}  // namespace tunableop::llm
