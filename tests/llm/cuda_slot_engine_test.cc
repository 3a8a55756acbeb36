// The CUDA engine's continuous-batching calls (prefill_slots / decode_slots) against the plain
// prefill()/decode() of each sequence alone: packed and chunked prefills, ragged decode steps
// padded to buckets and replayed from CUDA graphs, sequences joining and leaving, fused
// projections on and off; fp32 gives the same tokens, bf16 the same tokens here too (the
// prompts are short and the model small) and logits within bf16 rounding. Sampled rows on the
// GPU give the host algorithm's token on the same logits. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "llm/engine.h"
#include "llm/random_model.h"
#include "llm/sampling.h"
#include "llm_test_util.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

struct Gpu {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Engine> engine;
};

// A CUDA engine of the built-in tiny model on a default-only context; null (test skipped by
// the caller) where there is no GPU.
Gpu gpu_engine(DType dtype, int64_t max_batch, EngineOptions::Fusion fusion, Status* why) {
  Gpu g;
  g.ctx = std::make_unique<Context>(Device::cuda(0), Config::defaults_only());
  EngineOptions o;
  o.max_batch = max_batch;
  o.max_seq = 64;
  o.dtype = dtype;
  o.fusion = fusion;
  o.kv_cache.kind = KvCacheKind::kPaged;
  o.kv_cache.page_size = 8;
  ModelSpec spec;
  spec.builtin = true;
  spec.preset = "tiny";
  auto e = make_cuda_engine(spec, 7, 0, o, *g.ctx);
  if (!e.is_ok()) {
    *why = e.status();
    return g;
  }
  g.engine = std::move(e.value());
  return g;
}

#define GPU_ENGINE(var, dtype, batch, fusion)                                                       \
  Status var##_why;                                                                                 \
  Gpu var = gpu_engine(dtype, batch, fusion, &var##_why);                                           \
  if (!var.engine && var##_why.code() == StatusCode::kUnsupported) GTEST_SKIP() << var##_why.message(); \
  ASSERT_TRUE(var.engine) << var##_why.to_string()

std::vector<int32_t> prompt_of(int64_t n, int salt, int64_t vocab) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = int32_t((3 + 37 * i + 101 * salt) % vocab);
  return p;
}

class CudaSlots : public ::testing::TestWithParam<std::tuple<DType, EngineOptions::Fusion>> {};

TEST_P(CudaSlots, ContinuousBatchEqualsEachSequenceAlone) {
  const auto [dtype, fusion] = GetParam();
  GPU_ENGINE(alone, dtype, 1, fusion);
  GPU_ENGINE(batch, dtype, 8, fusion);
  const int64_t V = batch.engine->config().vocab_size;
  const int steps = 12;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(prompt_of(3 + 7 * i, i, V));
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) {
    std::vector<int32_t> next, out;
    ASSERT_TRUE(alone.engine->prefill({p}, &next).is_ok());
    out.push_back(next[0]);
    while (int(out.size()) < steps) {
      ASSERT_TRUE(alone.engine->decode({next[0]}, &next).is_ok());
      out.push_back(next[0]);
    }
    want.push_back(out);
  }
  // Sequences start two at a time (the second of each pair chunked over two passes), decode
  // steps run over whoever is decoding (batch sizes 1..6: several buckets), and every sequence
  // leaves after `steps` tokens.
  Engine& e = *batch.engine;
  std::vector<std::vector<int32_t>> got(prompts.size());
  std::vector<int64_t> slot(prompts.size());
  std::vector<bool> started(prompts.size(), false);
  for (size_t i = 0; i < prompts.size(); ++i) slot[i] = int64_t(7 - i);
  std::vector<int32_t> next;
  size_t begun = 0;
  for (int round = 0; round < 64; ++round) {
    if (begun < prompts.size()) {
      const size_t a = begun, b = begun + 1;
      const int64_t half = int64_t(prompts[b].size()) / 2;
      ASSERT_TRUE(e.prefill_slots({{slot[a], prompts[a].data(), int64_t(prompts[a].size())},
                                   {slot[b], prompts[b].data(), half}},
                                  nullptr, &next)
                      .is_ok());
      got[a].push_back(next[0]);
      ASSERT_TRUE(e.prefill_slots({{slot[b], prompts[b].data() + half, int64_t(prompts[b].size()) - half}}, nullptr,
                                  &next)
                      .is_ok());
      got[b].push_back(next[0]);
      started[a] = started[b] = true;
      begun += 2;
    }
    std::vector<int64_t> slots;
    std::vector<int32_t> tokens;
    std::vector<size_t> who;
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (started[i] && int(got[i].size()) < steps) {
        slots.push_back(slot[i]);
        tokens.push_back(got[i].back());
        who.push_back(i);
      }
    }
    if (slots.empty()) break;
    ASSERT_TRUE(e.decode_slots(slots, tokens, nullptr, &next).is_ok());
    for (size_t k = 0; k < who.size(); ++k) {
      got[who[k]].push_back(next[k]);
      if (int(got[who[k]].size()) == steps) e.release_slot(slot[who[k]]);
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], want[i]) << "sequence " << i;
  EXPECT_EQ(e.kv_cache_stats().free_pages, e.slot_pages());
}

INSTANTIATE_TEST_SUITE_P(DtypesAndFusion, CudaSlots,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(EngineOptions::Fusion::kOff,
                                                              EngineOptions::Fusion::kOn)));

// Sampled rows on the GPU equal sample_row() on the same logits (but for draws within rounding
// of a boundary, which these few rows do not hit), greedy rows stay the argmax.
TEST(CudaSlots, DeviceSamplingFollowsTheHostAlgorithm) {
  GPU_ENGINE(g, DType::kF32, 4, EngineOptions::Fusion::kOff);
  Engine& e = *g.engine;
  const int64_t V = e.config().vocab_size;
  std::vector<std::vector<int32_t>> prompts = {prompt_of(5, 1, V), prompt_of(9, 2, V), prompt_of(4, 3, V)};
  SamplingRow rows[3];
  rows[0].temperature = 0.7f, rows[0].top_k = 40, rows[0].seed = 3;
  rows[1].temperature = 1.3f, rows[1].top_p = 0.9f, rows[1].seed = 4, rows[1].counter = 11;
  rows[2].temperature = 0;  // greedy
  std::vector<int32_t> next;
  ASSERT_TRUE(e.prefill_slots({{0, prompts[0].data(), 5}, {1, prompts[1].data(), 9}, {2, prompts[2].data(), 4}}, rows,
                              &next)
                  .is_ok());
  std::vector<float> logits;
  ASSERT_TRUE(e.last_logits(&logits).is_ok());
  for (int i = 0; i < 3; ++i) {
    auto want = sample_row(std::span<const float>(logits.data() + i * V, size_t(V)), rows[i]);
    ASSERT_TRUE(want.is_ok());
    EXPECT_EQ(next[size_t(i)], *want) << "row " << i;
  }
}

}  // namespace
}  // namespace tunableop::llm
