// The engine's continuous-batching calls (Engine::prefill_slots / decode_slots) on the CPU:
// sequences in any slots, joining and leaving at any step, prompts chunked over several passes
// and packed with others must give the tokens and logits each sequence gets alone through the
// plain prefill()/decode(); the pass layouts (model_slots.h) on their own; errors.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <tuple>

#include "llm/engine.h"
#include "llm/model_slots.h"
#include "llm_test_util.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

std::unique_ptr<Engine> paged_engine(const ModelConfig& c, Context& ctx, int64_t max_batch, int64_t page,
                                     int64_t pad = 8, int64_t bucket_step = 0) {
  auto w = std::make_shared<const ModelWeights>(make_random_weights(c, 7));
  EngineOptions o = testing::options(max_batch, 48, pad);
  o.decode_bucket_step = bucket_step;
  o.kv_cache.kind = KvCacheKind::kPaged;
  o.kv_cache.page_size = page;
  auto e = make_cpu_engine(w, o, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return e.is_ok() ? std::move(e.value()) : nullptr;
}

std::vector<int32_t> prompt_of(int64_t n, int64_t vocab, int salt) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = int32_t((3 + 11 * i + 5 * salt) % vocab);
  return p;
}

// Each prompt alone through prefill() and decode(): `steps` greedy tokens.
std::vector<int32_t> alone(const ModelConfig& c, Context& ctx, const std::vector<int32_t>& prompt, int steps) {
  auto e = paged_engine(c, ctx, 1, 4);
  std::vector<int32_t> next, out;
  EXPECT_TRUE(e->prefill({prompt}, &next).is_ok());
  out.push_back(next[0]);
  for (int s = 1; s < steps; ++s) {
    EXPECT_TRUE(e->decode({next[0]}, &next).is_ok());
    out.push_back(next[0]);
  }
  return out;
}

TEST(SlotLayout, PackedPrefillRowsAndTables) {
  const int32_t rowa[] = {5, 6, 7}, rowb[] = {9};
  const int32_t ta[] = {1, 2, 3, 4, 5}, tb[] = {8, 9};
  // Slot 3 holds 2 positions and adds 5; slot 0 starts empty and adds 2. Pages of 4, 3 per seq.
  std::vector<SlotPassInput> in = {{3, 2, 5, ta, rowa}, {0, 0, 2, tb, rowb}};
  auto L = layout_prefill(in, 8, 3, 4, 12, 42);
  ASSERT_TRUE(L.is_ok()) << L.status().to_string();
  EXPECT_EQ(L->rows, 8);  // 7 tokens, rounded up to 8
  EXPECT_EQ(L->batch, 2);
  EXPECT_EQ(L->ids, (std::vector<int32_t>{1, 2, 3, 4, 5, 8, 9, 0}));
  EXPECT_EQ(L->seqs, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 1, 2}));  // the padding row: sequence 2
  EXPECT_EQ(L->positions, (std::vector<int32_t>{2, 3, 4, 5, 6, 0, 1, 0}));
  EXPECT_EQ(L->lens, (std::vector<int32_t>{7, 2, 0}));
  EXPECT_EQ(L->q_lens, (std::vector<int32_t>{5, 2, 0}));
  EXPECT_EQ(L->offsets, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(L->last_rows, (std::vector<int64_t>{4, 6}));
  // Each chunk's attention: counts rounded up to powers of two from 16, capped at max_seq 12.
  EXPECT_EQ(L->q_buckets, (std::vector<int64_t>{12, 12}));
  EXPECT_EQ(L->kv_buckets, (std::vector<int64_t>{12, 12}));
  EXPECT_EQ(L->slack, 12);
  // Slot 3's 7 positions use 2 pages, slot 0's 2 use 1; the rest (and the padding row) the scratch page.
  EXPECT_EQ(L->table, (std::vector<int32_t>{5, 6, 42, 9, 42, 42, 42, 42, 42}));
  // 60 positions in pages of 4 need a table row of 15 pages; the row holds all 32.
  const std::vector<int32_t> t20(20, 1), row32(32, 7);
  auto wide = layout_prefill({{1, 40, 20, t20.data(), row32.data()}}, 8, 32, 4, 128, 0);
  ASSERT_TRUE(wide.is_ok());
  EXPECT_EQ(wide->q_buckets, (std::vector<int64_t>{32}));
  EXPECT_EQ(wide->kv_buckets, (std::vector<int64_t>{64}));
}

TEST(SlotLayout, DecodePadsToTheBucketWithScratchRows) {
  const int32_t row[] = {3, 4}, tok = 7;
  auto L = layout_decode({{5, 4, 1, &tok, row}}, 4, 2, 4, 9);
  ASSERT_TRUE(L.is_ok());
  EXPECT_EQ(L->rows, 4);
  EXPECT_EQ(L->ids, (std::vector<int32_t>{7, 0, 0, 0}));
  EXPECT_EQ(L->positions, (std::vector<int32_t>{4, 0, 0, 0}));
  EXPECT_EQ(L->lens, (std::vector<int32_t>{5, 1, 1, 1}));
  EXPECT_EQ(L->table, (std::vector<int32_t>{3, 4, 9, 9, 9, 9, 9, 9}));
}

TEST(SlotLayout, Errors) {
  const int32_t row[] = {1}, tok = 1;
  EXPECT_FALSE(layout_prefill({}, 8, 1, 4, 4, 0).is_ok());
  EXPECT_FALSE(layout_decode({{0, 4, 1, &tok, row}}, 1, 1, 4, 0).is_ok());  // position 4 past 1 page of 4
  EXPECT_FALSE(layout_decode({{0, 0, 1, &tok, row}, {0, 1, 1, &tok, row}}, 2, 1, 4, 0).is_ok());  // slot twice
  EXPECT_FALSE(layout_decode({{0, 0, 1, &tok, row}, {1, 0, 1, &tok, row}}, 1, 1, 4, 0).is_ok());  // bucket < n
}

// Llama (false) or Gemma (true); the decode bucket step (0: powers of two).
class SlotEngine : public ::testing::TestWithParam<std::tuple<bool, int64_t>> {};

// Three prompts of different lengths: one chunked over three passes, the others packed, slots out
// of order, a sequence joining the decode steps late and one leaving early. Every sequence's
// tokens equal its own prefill()+decode() run.
TEST_P(SlotEngine, ContinuousBatchEqualsEachSequenceAlone) {
  const ModelConfig c = std::get<0>(GetParam()) ? testing::small_gemma() : testing::small_llama();
  Context ctx(Device::cpu(), Config::defaults_only());
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(13, c.vocab_size, 0), prompt_of(3, c.vocab_size, 1),
                                                     prompt_of(7, c.vocab_size, 2)};
  const int steps = 6;
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) want.push_back(alone(c, ctx, p, steps));

  // Bucket step 3: three sequences decode at a bucket of 3, not 4 (buckets 1, 2, 3, 4).
  auto e = paged_engine(c, ctx, 4, 4, 8, std::get<1>(GetParam()));
  ASSERT_TRUE(e);
  const int64_t slot[] = {2, 0, 3};
  std::vector<std::vector<int32_t>> got(3);
  std::vector<int32_t> next;
  // Pass 1: prompt 0's first 5 tokens with prompt 1 whole.
  ASSERT_TRUE(
      e->prefill_slots({{slot[0], prompts[0].data(), 5}, {slot[1], prompts[1].data(), 3}}, nullptr, &next).is_ok());
  got[1].push_back(next[1]);
  // Decode prompt 1 once, then pass 2: prompt 0's next 6 tokens.
  ASSERT_TRUE(e->decode_slots({slot[1]}, {got[1].back()}, nullptr, &next).is_ok());
  got[1].push_back(next[0]);
  ASSERT_TRUE(e->prefill_slots({{slot[0], prompts[0].data() + 5, 6}}, nullptr, &next).is_ok());
  // Pass 3: the rest of prompt 0 and all of prompt 2.
  ASSERT_TRUE(e->prefill_slots({{slot[2], prompts[2].data(), 7}, {slot[0], prompts[0].data() + 11, 2}}, nullptr, &next)
                  .is_ok());
  got[2].push_back(next[0]);
  got[0].push_back(next[1]);
  EXPECT_EQ(e->slot_length(slot[0]), 13);
  // Decode all three (in another order) until each has `steps` tokens; prompt 1 leaves first.
  while (got[0].size() < size_t(steps) || got[2].size() < size_t(steps)) {
    std::vector<int64_t> slots;
    std::vector<int32_t> tokens;
    std::vector<int> which;
    for (int i : {2, 1, 0}) {
      if (got[size_t(i)].size() < size_t(steps)) {
        slots.push_back(slot[i]);
        tokens.push_back(got[size_t(i)].back());
        which.push_back(i);
      }
    }
    ASSERT_TRUE(e->decode_slots(slots, tokens, nullptr, &next).is_ok());
    ASSERT_EQ(next.size(), slots.size());
    for (size_t k = 0; k < which.size(); ++k) got[size_t(which[k])].push_back(next[k]);
    if (got[1].size() == size_t(steps)) e->release_slot(slot[1]);
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[size_t(i)], want[size_t(i)]) << "prompt " << i;
}

INSTANTIATE_TEST_SUITE_P(Models, SlotEngine, ::testing::Combine(::testing::Bool(), ::testing::Values(0, 3)));

// decode_bucket_step: powers of two up to the step, then its multiples, then max_batch.
TEST(SlotEngine, DecodeBucketStepBoundsThePadding) {
  const ModelConfig c = testing::small_llama();
  Context ctx(Device::cpu(), Config::defaults_only());
  auto pow2 = paged_engine(c, ctx, 10, 4);
  EXPECT_EQ(pow2->decode_buckets(), (std::vector<int64_t>{1, 2, 4, 8, 10}));
  auto step3 = paged_engine(c, ctx, 10, 4, 8, 3);
  EXPECT_EQ(step3->decode_buckets(), (std::vector<int64_t>{1, 2, 3, 6, 9, 10}));
  EXPECT_EQ(step3->decode_bucket(4), 6);
  EXPECT_EQ(step3->decode_bucket(7), 9);
  EXPECT_EQ(step3->decode_bucket(10), 10);
  auto step4 = paged_engine(c, ctx, 12, 4, 8, 4);
  EXPECT_EQ(step4->decode_buckets(), (std::vector<int64_t>{1, 2, 4, 8, 12}));
  EXPECT_EQ(paged_engine(c, ctx, 10, 4, 8, 64)->decode_buckets(), (std::vector<int64_t>{1, 2, 4, 8, 10}));
  auto w = std::make_shared<const ModelWeights>(make_random_weights(c, 7));
  EngineOptions o = testing::options(4, 48, 8);
  o.decode_bucket_step = -1;
  auto bad = make_cpu_engine(w, o, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("decode_bucket_step must be >= 0"), std::string::npos)
      << bad.status().message();
}

// Released slots give their pages back and are reused; the pool never leaks.
TEST(SlotEngine, ReleaseReturnsPagesAndSlotsAreReused) {
  const ModelConfig c = testing::small_llama();
  Context ctx(Device::cpu(), Config::defaults_only());
  auto e = paged_engine(c, ctx, 2, 4);
  const int64_t pages = e->slot_pages();
  const int64_t free0 = e->kv_cache_stats().free_pages;
  std::vector<int32_t> next;
  for (int round = 0; round < 5; ++round) {
    const auto p = prompt_of(9 + round, c.vocab_size, round);
    ASSERT_TRUE(e->prefill_slots({{round % 2, p.data(), int64_t(p.size())}}, nullptr, &next).is_ok());
    ASSERT_TRUE(e->decode_slots({round % 2}, {next[0]}, nullptr, &next).is_ok());
    e->release_slot(round % 2);
    EXPECT_EQ(e->slot_length(round % 2), 0);
  }
  EXPECT_EQ(e->kv_cache_stats().free_pages, free0);
  EXPECT_EQ(pages, e->kv_cache_stats().pages - 1);  // one page kept for padding rows
}

// Sampled tokens on the engine equal sample_row() on its logits (the CPU device samples on the
// host), and temperature 0 rows stay greedy next to sampled ones.
TEST(SlotEngine, SamplingRowsFollowTheHostAlgorithm) {
  const ModelConfig c = testing::small_gemma();
  Context ctx(Device::cpu(), Config::defaults_only());
  auto e = paged_engine(c, ctx, 2, 4);
  const auto p0 = prompt_of(5, c.vocab_size, 3), p1 = prompt_of(6, c.vocab_size, 4);
  SamplingRow rows[2];
  rows[0].temperature = 0.9f, rows[0].top_k = 20, rows[0].top_p = 0.9f, rows[0].seed = 11, rows[0].counter = 0;
  rows[1].temperature = 0;  // greedy
  std::vector<int32_t> next;
  ASSERT_TRUE(e->prefill_slots({{0, p0.data(), 5}, {1, p1.data(), 6}}, rows, &next).is_ok());
  std::vector<float> logits;
  ASSERT_TRUE(e->last_logits(&logits).is_ok());
  ASSERT_EQ(logits.size(), size_t(2 * c.vocab_size));
  auto want0 = sample_row(std::span<const float>(logits.data(), size_t(c.vocab_size)), rows[0]);
  ASSERT_TRUE(want0.is_ok());
  EXPECT_EQ(next[0], *want0);
  const auto* row1 = logits.data() + c.vocab_size;
  EXPECT_EQ(next[1], int32_t(std::max_element(row1, row1 + c.vocab_size) - row1));
}

TEST(SlotEngine, ErrorsNameWhatIsWrong) {
  const ModelConfig c = testing::small_llama();
  Context ctx(Device::cpu(), Config::defaults_only());
  auto e = paged_engine(c, ctx, 2, 4);
  std::vector<int32_t> next;
  const int32_t bad = int32_t(c.vocab_size), ok = 1;
  auto st = e->prefill_slots({{0, &bad, 1}}, nullptr, &next);
  EXPECT_NE(st.message().find("outside the vocabulary"), std::string::npos) << st.to_string();
  st = e->prefill_slots({{2, &ok, 1}}, nullptr, &next);
  EXPECT_NE(st.message().find("slot 2"), std::string::npos) << st.to_string();
  const auto long_prompt = prompt_of(49, c.vocab_size, 0);
  st = e->prefill_slots({{0, long_prompt.data(), 49}}, nullptr, &next);
  EXPECT_NE(st.message().find("do not fit"), std::string::npos) << st.to_string();
  // A static cache refuses the slot calls.
  auto w = std::make_shared<const ModelWeights>(make_random_weights(c, 7));
  auto s = make_cpu_engine(w, testing::options(1, 16, 8), tunableop_linear(ctx), tunableop_gemm(ctx),
                           tunableop_attention(ctx));
  ASSERT_TRUE(s.is_ok());
  st = (*s)->prefill_slots({{0, &ok, 1}}, nullptr, &next);
  EXPECT_NE(st.message().find("paged"), std::string::npos) << st.to_string();
}

}  // namespace
}  // namespace tunableop::llm
