// The CPU engine end to end: against the fp64 reference forward pass (attention through the
// attention op on a static or paged cache, and the GEMM path without one), padding and batching
// invariance, the paged cache equal to the static one, the distinct-problem counts, tuning
// through the context's results file, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include "llm/attention_gemms.h"
#include "llm/engine.h"
#include "llm/generate.h"
#include "llm_test_util.h"
#include "naive_model.h"
#include "reference_check.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

using testing::ScratchDir;

// The engine as the CLI builds it: GEMMs and attention through the context.
std::unique_ptr<Engine> make_engine(const ModelConfig& c, Context& ctx, EngineOptions o = {}, uint64_t seed = 1) {
  auto w = std::make_shared<const ModelWeights>(make_random_weights(c, seed));
  auto e = make_cpu_engine(w, o, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return std::move(e.value());
}

using testing::AttentionPath;
using testing::check_against_reference;
using testing::default_only_context;
using testing::paged;

TEST(LlmEngine, LlamaGqaMatchesFp64Reference) { check_against_reference(testing::small_llama(), {5, 17, 3}, 8, 8); }
TEST(LlmEngine, GemmaMqaMatchesFp64Reference) {
  check_against_reference(testing::small_gemma(), {1, 2, 60, 7, 7}, 8, 8);
}
TEST(LlmEngine, UnpaddedMatchesFp64Reference) { check_against_reference(testing::small_llama(), {9, 4, 4, 80}, 6, 1); }
TEST(LlmEngine, PagedCacheMatchesFp64Reference) {
  check_against_reference(testing::small_llama(), {5, 17, 3, 1, 1, 9}, 8, 8, AttentionPath::kOpPaged);
  check_against_reference(testing::small_gemma(), {5, 17, 3, 1, 1, 9}, 8, 1, AttentionPath::kOpPaged);
}
TEST(LlmEngine, GemmAndKernelAttentionWithoutTheOpMatchFp64Reference) {
  for (AttentionPath path : {AttentionPath::kGemms, AttentionPath::kKernel}) {
    check_against_reference(testing::small_llama(), {5, 17, 3, 1, 1}, 4, 8, path);
    check_against_reference(testing::small_gemma(), {5, 17, 3, 1, 1}, 4, 8, path);
  }
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

// A ragged batch (varlen prefill: per-sequence query and key counts; ragged decode) equals each
// prompt run alone, on either cache.
class LlmEngineBatch : public ::testing::TestWithParam<int64_t> {};  // page size; 0: static cache

TEST_P(LlmEngineBatch, DifferentLengthsEqualSingleRuns) {
  auto ctx = default_only_context();
  const ModelConfig c = testing::small_llama();
  const std::vector<std::vector<int32_t>> prompts = {{7, 8, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {42}};
  auto opts = [&](int64_t batch) {
    EngineOptions o = testing::options(batch, 48, 8);
    return GetParam() ? paged(o, GetParam()) : o;
  };
  auto batched = make_engine(c, *ctx, opts(3));
  auto gb = generate(*batched, prompts, 9);
  ASSERT_TRUE(gb.is_ok()) << gb.status().to_string();
  EXPECT_EQ(batched->padded_prompt_length(), 16);
  EXPECT_EQ(batched->sequence_lengths(), (std::vector<int64_t>{3 + 8, 10 + 8, 1 + 8}));
  std::vector<float> lb;
  ASSERT_TRUE(batched->last_logits(&lb).is_ok());
  for (size_t b = 0; b < prompts.size(); ++b) {
    auto single = make_engine(c, *ctx, opts(1));
    auto gs = generate(*single, {prompts[b]}, 9);
    ASSERT_TRUE(gs.is_ok());
    EXPECT_EQ(gb->tokens[b], gs->tokens[0]) << "sequence " << b;
    std::vector<float> ls;
    ASSERT_TRUE(single->last_logits(&ls).is_ok());
    for (int64_t i = 0; i < c.vocab_size; ++i)
      ASSERT_NEAR(lb[size_t(int64_t(b) * c.vocab_size + i)], ls[size_t(i)], 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Caches, LlmEngineBatch, ::testing::Values(0, 4, 16),
                         [](const auto& info) { return info.param ? "Paged" + std::to_string(info.param) : "Static"; });

// Pages released by one generation come back in another order for the next: the paged engine
// still equals the static one, logit for logit, and its memory is what the sequences hold.
TEST(LlmEngine, PagedCacheEqualsStaticAndHoldsOnlyWhatIsUsed) {
  auto ctx = default_only_context();
  const ModelConfig c = testing::small_gemma();
  auto st = make_engine(c, *ctx, testing::options(3, 48, 8));
  auto pg = make_engine(c, *ctx, paged(testing::options(3, 48, 8), 4));
  const std::vector<std::vector<std::vector<int32_t>>> runs = {
      {{1, 2, 3, 4, 5, 6, 7, 8, 9}, {4, 4, 4, 4, 4}, {5, 6, 7, 8}},
      {{8, 8}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, {3}}};
  for (const auto& prompts : runs) {
    auto gs = generate(*st, prompts, 7);
    auto gp = generate(*pg, prompts, 7);
    ASSERT_TRUE(gs.is_ok() && gp.is_ok()) << gs.status().to_string() << gp.status().to_string();
    EXPECT_EQ(gs->tokens, gp->tokens);
    std::vector<float> ls, lp;
    ASSERT_TRUE(st->last_logits(&ls).is_ok() && pg->last_logits(&lp).is_ok());
    for (size_t i = 0; i < ls.size(); ++i) ASSERT_NEAR(ls[i], lp[i], 1e-5) << i;
  }
  // 6 decode steps after each prefill. First run: 15, 11 and 10 positions -> 4 + 3 + 3 pages of
  // 4 (the peak); last run: 8, 19 and 7 -> 2 + 5 + 2 pages in use.
  const KvCacheStats s = st->kv_cache_stats(), p = pg->kv_cache_stats();
  const int64_t per_position = 2 * c.num_layers * c.num_kv_heads * c.head_dim * 4;
  EXPECT_EQ(s.kind, KvCacheKind::kStatic);
  EXPECT_EQ(s.allocated, 3 * 48 * per_position);
  EXPECT_EQ(s.in_use, s.allocated);
  EXPECT_EQ(p.kind, KvCacheKind::kPaged);
  EXPECT_EQ(p.page_size, 4);
  EXPECT_EQ(p.bytes_per_position, per_position);
  EXPECT_EQ(p.in_use, 9 * 4 * per_position);
  EXPECT_EQ(p.peak_in_use, 10 * 4 * per_position);
  // Default pool: every sequence at full length, and the continuous batch's padding page.
  EXPECT_EQ(p.allocated, (3 * 12 + 1) * 4 * per_position);
}

TEST(LlmEngine, PagedCacheOutOfPagesIsAnError) {
  auto ctx = default_only_context();
  auto e = make_engine(testing::small_llama(), *ctx, paged(testing::options(2, 48, 8), 4, 5));
  auto g = generate(*e, {{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}, 3);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("out of pages"), std::string::npos) << g.status().message();
  // The pool fits one of them.
  EXPECT_TRUE(generate(*e, {{1, 2, 3, 4, 5, 6, 7, 8, 9}}, 3).is_ok());
}

// Seed Example 2's point: a static cache and padded prompts leave few problems. Per layer 4
// GEMMs (qkv, o, gate_up, down) at prompt rows and at batch rows, lm_head at batch rows, and two
// attention problems (prefill; decode against the whole cache). Without the attention op the
// prefill attention is two more GEMMs instead.
TEST(LlmEngine, CountsDistinctProblems) {
  const ModelConfig c = testing::small_llama();
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  for (bool op : {true, false}) {
    SCOPED_TRACE(op ? "attention op" : "attention GEMMs");
    auto ctx = default_only_context();
    auto w = std::make_shared<const ModelWeights>(make_random_weights(c, 1));
    auto made = make_cpu_engine(w, testing::options(2, 48, 8), tunableop_linear(*ctx), tunableop_gemm(*ctx),
                                op ? tunableop_attention(*ctx) : LinearOp::AttentionFn{});
    ASSERT_TRUE(made.is_ok());
    Engine& e = **made;
    // Two prompt lengths padding to the same 8: the same problems again.
    for (auto prompt : {std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{4, 5, 6, 7, 8, 9}}) {
      auto g = generate(e, {prompt, prompt}, 6);
      ASSERT_TRUE(g.is_ok());
    }
    std::set<std::string> expected;
    for (int64_t rows : {int64_t(16), int64_t(2)}) {
      for (auto [in, out] : {std::pair{H, c.qkv_dim()}, {c.q_dim(), H}, {H, 2 * I}, {I, H}}) {
        expected.insert(gemm_params_signature(linear_params(DType::kF32, rows, in, out)));
      }
    }
    expected.insert(gemm_params_signature(linear_params(DType::kF32, 2, H, c.vocab_size)));
    if (!op) {
      const AttentionGemms att = prefill_attention_gemms(c, DType::kF32, 2, 8, 48);
      expected.insert(gemm_params_signature(att.scores.with_defaults()));
      expected.insert(gemm_params_signature(att.output.with_defaults()));
    }
    std::set<std::string> got;
    int prefill = 0, decode = 0;
    for (const auto& p : e.linear().problems()) {
      got.insert(p.params);
      prefill += p.in_prefill;
      decode += p.in_decode;
    }
    EXPECT_EQ(got, expected);
    EXPECT_EQ(got.size(), op ? 9u : 11u);
    // 4 at 16 rows (+ 2 attention GEMMs), the last layer's o, gate_up and down at its 2 output
    // rows, lm_head at 2 rows
    EXPECT_EQ(prefill, op ? 8 : 10);
    EXPECT_EQ(decode, 5);
    // 2 runs x (prefill: 4 (+2) in the first layer, 4 in the last (its output rows' attention
    // runs as a decode step's, no GEMMs), lm_head; 5 decode steps: 4 x 2 + lm_head)
    EXPECT_EQ(e.linear().calls(), 2 * ((op ? 4 : 6) + 4 + 1 + 5 * (4 * 2 + 1)));
    const auto attention = e.linear().attention_problems();
    if (!op) {
      EXPECT_TRUE(attention.empty());
      continue;
    }
    ASSERT_EQ(attention.size(), 2u);
    // Prompts of 3 and 6 tokens padded to 8: per-sequence query and key counts (vq, vk).
    EXPECT_EQ(attention[0].params, "b2_q8_k8_h4_kv2_d8_ms48_vk_vq_qs64");
    EXPECT_EQ(attention[1].params, "b2_q1_k48_h4_kv2_d8_vk_qs64");
    EXPECT_EQ(attention[0].op, "AttentionTunableOp_float_causal");
    EXPECT_EQ(attention[0].calls, 2 * 1);            // the first layer of each prefill
    EXPECT_EQ(attention[1].calls, 2 * (5 * 2 + 1));  // decode steps, and each prefill's last layer
  }
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
  // Tiny budgets: this checks the plumbing, not the choice.
  auto tuned_context = [&] { return std::make_unique<Context>(Device::cpu(), testing::quick_tuning_config(file)); };
  const ModelConfig c = testing::small_gemma();
  std::vector<int32_t> tokens_first;
  std::string results_path;
  {
    auto ctx = tuned_context();
    auto e = make_engine(c, *ctx, testing::options(1, 48, 8));
    auto g = generate(*e, {{1, 2, 3}}, 5);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    tokens_first = g->tokens[0];
    // Every GEMM and attention problem tuned once, into the same results file.
    EXPECT_EQ(ctx->results().size(), e->linear().problems().size() + e->linear().attention_problems().size());
    EXPECT_EQ(e->linear().attention_problems().size(), 2u);
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
  auto r = run_benchmark(*e, {{1, 2, 3}, {1, 2, 3}}, {6, 2, 1, {}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->generated_tokens, 2 * 2 * 6);
  EXPECT_GT(r->tokens_per_s, 0);
  EXPECT_NEAR(r->latency_ms, r->ttft_ms + r->tpot_ms * 5, 1e-9);
  EXPECT_EQ(r->first_sequence.size(), 6u);
  EXPECT_EQ(r->gemm_problems.size(), 9u);
  // Prefill GEMM work: 2 x (non-embedding weights) x 8 padded rows x 2 sequences, less the last
  // layer's o (q_dim H weights) and MLP (3 H I) on all but the 2 output rows, plus lm_head at 2
  // rows; attention apart: 4 x heads x head_dim x the 36 (query, key) pairs of an 8-token causal
  // triangle, per sequence and layer but the last, whose output rows run as decode steps.
  const ModelConfig c = testing::small_gemma();
  const double weights =
      double(c.parameter_count() - c.vocab_size * c.hidden_size - c.hidden_size - c.num_layers * 2 * c.hidden_size);
  const double head = 2.0 * 2 * c.hidden_size * c.vocab_size;
  const double last_layer_skipped =
      2.0 * (3 * c.hidden_size * c.intermediate_size + c.q_dim() * c.hidden_size) * (16 - 2);
  EXPECT_NEAR(r->prefill_gflop * 1e9, 2.0 * weights * 16 - last_layer_skipped + head, 1.0);
  EXPECT_NEAR(r->prefill_attention_gflop * 1e9, (c.num_layers - 1) * 2 * (4.0 * c.num_heads * c.head_dim * 36), 1e-3);
  EXPECT_EQ(r->weight_bytes, c.parameter_count() * 4);
  EXPECT_NE(format_report(*r).find("Tokens/second: "), std::string::npos);
  EXPECT_NE(report_json(*r).find("\"tokens_per_s\""), std::string::npos);
}

}  // namespace
}  // namespace tunableop::llm
