// The tensor-parallel engine on the CPU (ranks are host threads, all-reduce through the op on
// the host communicator): greedy tokens and logits equal the one-device engine's, on random
// models (GQA split and copied kv heads, MQA, uneven MLP and vocabulary splits, batches of
// prompts of different lengths) and on the Hugging Face fixtures; the all-reduces are tuned and
// kept in the results file like any GEMM; bad input fails on every rank without a hang.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/generate.h"
#include "llm/llm_test_util.h"
#include "llm/parallel/tp_engine.h"
#include "llm/random_model.h"

namespace tunableop::llm {
namespace {

using testing::relative_error;

struct Compared {
  std::vector<std::vector<int32_t>> one, tp;
  double logit_error = 0;
};

// The same prompts, greedy, on one device and on `world` ranks.
Compared compare(const std::shared_ptr<const ModelWeights>& w, int world,
                 const std::vector<std::vector<int32_t>>& prompts, int64_t steps, Context& ctx, bool paged = false) {
  EngineOptions o = testing::options(int64_t(prompts.size()), 64, 4);
  if (paged) {  // each rank pages its own kv heads
    o.kv_cache.kind = KvCacheKind::kPaged;
    o.kv_cache.page_size = 8;
  }
  Compared out;
  auto one = make_cpu_engine(w, o, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
  EXPECT_TRUE(one.is_ok()) << one.status().to_string();
  auto tp = make_cpu_tp_engine(w, o, std::vector<Context*>(size_t(world), &ctx));
  EXPECT_TRUE(tp.is_ok()) << tp.status().to_string();
  if (!one.is_ok() || !tp.is_ok()) return out;
  auto g1 = generate(**one, prompts, steps);
  auto g2 = generate(**tp, prompts, steps);
  EXPECT_TRUE(g1.is_ok() && g2.is_ok()) << g2.status().to_string();
  if (!g1.is_ok() || !g2.is_ok()) return out;
  out.one = g1->tokens;
  out.tp = g2->tokens;
  std::vector<float> l1, l2;
  EXPECT_TRUE((*one)->last_logits(&l1).is_ok());
  EXPECT_TRUE((*tp)->last_logits(&l2).is_ok());
  EXPECT_EQ(l1.size(), l2.size());
  out.logit_error = l1.size() == l2.size() ? relative_error(l2, l1) : 1.0;
  EXPECT_NE((*tp)->device_name().find("tensor parallel over " + std::to_string(world) + " ranks"), std::string::npos);
  return out;
}

TEST(TensorParallelCpu, RandomModelsMatchOneDevice) {
  Context ctx(Device::cpu(), Config::defaults_only());
  ModelConfig gemma = testing::small_gemma();
  gemma.num_heads = 4;  // MQA over 2 and 4 ranks: the kv head copied
  gemma.head_dim = 6;
  for (const auto& [config, world] : std::vector<std::pair<ModelConfig, int>>{
           {testing::small_llama(), 2}, {testing::small_llama(), 4}, {gemma, 2}, {gemma, 4}}) {
    auto w = std::make_shared<const ModelWeights>(make_random_weights(config, 11));
    const std::vector<std::vector<int32_t>> prompts = {{1, 5, 17, 30, 2}, {7, 3}};
    Compared c = compare(w, world, prompts, 12, ctx);
    EXPECT_EQ(c.tp, c.one) << architecture_name(config.arch) << " over " << world << " ranks";
    EXPECT_LT(c.logit_error, 1e-5) << architecture_name(config.arch) << " over " << world << " ranks";
  }
}

TEST(TensorParallelCpu, PagedCacheMatchesOneDevice) {
  Context ctx(Device::cpu(), Config::defaults_only());
  auto w = std::make_shared<const ModelWeights>(make_random_weights(testing::small_llama(), 13));
  const std::vector<std::vector<int32_t>> prompts = {{4, 9, 1}, {8, 2, 6, 11, 3, 5, 7, 12, 10}};
  Compared c = compare(w, 2, prompts, 20, ctx, /*paged=*/true);
  ASSERT_FALSE(c.one.empty());
  EXPECT_EQ(c.tp, c.one);
  EXPECT_LT(c.logit_error, 1e-5);
}

TEST(TensorParallelCpu, TheDeviceLoopGivesTheHostLoopsTokens) {
  Context ctx(Device::cpu(), Config::defaults_only());
  auto w = std::make_shared<const ModelWeights>(make_random_weights(testing::small_llama(), 17));
  auto tp = make_cpu_tp_engine(w, testing::options(2, 64, 4), {&ctx, &ctx});
  ASSERT_TRUE(tp.is_ok()) << tp.status().to_string();
  ASSERT_TRUE((*tp)->decode_ahead_supported());
  const std::vector<std::vector<int32_t>> prompts = {{1, 5, 17, 30, 2}, {7, 3}};
  auto host = generate(**tp, prompts, testing::loop_options(10, DecodeLoop::kHost));
  ASSERT_TRUE(host.is_ok()) << host.status().to_string();
  for (int ahead : {1, 2}) {
    auto device = generate(**tp, prompts, testing::loop_options(10, DecodeLoop::kDevice, -1, ahead));
    ASSERT_TRUE(device.is_ok()) << device.status().to_string();
    EXPECT_EQ(device->tokens, host->tokens) << ahead << " steps ahead";
  }
}

TEST(TensorParallelCpu, HuggingFaceFixturesMatchOneDeviceAndTransformers) {
  const char* src = std::getenv("TUNABLEOP_SOURCE_DIR");
  const std::string root = std::string(src ? src : ".") + "/tests/fixtures/llm";
  Context ctx(Device::cpu(), Config::defaults_only());
  int ran = 0;
  for (const std::string name : {"llama_gqa", "gemma_mqa", "llama_tied_sharded"}) {
    std::ifstream in(root + "/" + name + "/reference.json");
    if (!in) continue;
    const auto ref = nlohmann::json::parse(in);
    auto w = load_model(root + "/" + name);
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    auto weights = std::make_shared<const ModelWeights>(std::move(w.value()));
    const auto prompt = ref["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = ref["greedy_ids"].get<std::vector<int32_t>>();
    for (int world : {2, 4}) {
      Compared c = compare(weights, world, {prompt}, int64_t(want.size()), ctx);
      EXPECT_EQ(c.tp, c.one) << name << " over " << world << " ranks";
      ASSERT_EQ(c.tp.size(), 1u);
      EXPECT_EQ(c.tp[0], want) << name << " over " << world << " ranks, against transformers";
      EXPECT_LT(c.logit_error, 1e-5) << name;
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no fixtures in " << root;
}

TEST(TensorParallelCpu, AllReducesAreTunedAndKeptInTheResultsFile) {
  testing::ScratchDir dir("tp_results");
  Config config = Config::defaults_only();
  ASSERT_TRUE(config.set(Setting::kEnabled, true).is_ok());
  ASSERT_TRUE(config.set(Setting::kFilename, dir.path() + "/results%d.csv").is_ok());
  ASSERT_TRUE(config.set(Setting::kMaxTuningIterations, 2).is_ok());
  ASSERT_TRUE(config.set(Setting::kMaxWarmupIterations, 1).is_ok());
  ASSERT_TRUE(config.set(Setting::kSearchEffort, 0).is_ok());
  ASSERT_TRUE(config.set(Setting::kRotatingBufferSize, 0).is_ok());
  Context ctx(Device::cpu(), std::move(config));
  const ModelConfig c = testing::small_llama();
  auto w = std::make_shared<const ModelWeights>(make_random_weights(c, 3));
  Compared r = compare(w, 2, {{1, 2, 3}}, 4, ctx);
  EXPECT_EQ(r.tp, r.one);
  std::ifstream in(dir.path() + "/results0.csv");
  const std::string file((std::istreambuf_iterator<char>(in)), {});
  // Prefill (4 padded rows) and decode (1 row) of the hidden size, and the vocabulary gather.
  for (int64_t n : {4 * c.hidden_size, c.hidden_size, c.vocab_size})
    EXPECT_NE(file.find("AllReduceTunableOp_float_sum,n_" + std::to_string(n) + "_ranks_2,"), std::string::npos)
        << n << "\n"
        << file;
}

TEST(TensorParallelCpu, BadInputFailsOnEveryRankWithoutAHang) {
  Context ctx(Device::cpu(), Config::defaults_only());
  auto w = std::make_shared<const ModelWeights>(make_random_weights(testing::small_llama(), 1));
  auto tp = make_cpu_tp_engine(w, testing::options(1, 32, 4), {&ctx, &ctx});
  ASSERT_TRUE(tp.is_ok()) << tp.status().to_string();
  std::vector<int32_t> next;
  Status st = (*tp)->prefill({{1, 2, 1000}}, &next);
  EXPECT_NE(st.message().find("outside the vocabulary"), std::string::npos) << st.to_string();
  st = (*tp)->decode({3}, &next);
  EXPECT_FALSE(st.is_ok());
  // Still usable afterwards.
  ASSERT_TRUE((*tp)->prefill({{1, 2, 3}}, &next).is_ok());
  EXPECT_EQ(next.size(), 1u);
  // A model that does not split over 3 ranks is refused with the reason.
  auto three = make_cpu_tp_engine(w, testing::options(1, 32, 4), {&ctx, &ctx, &ctx});
  EXPECT_NE(three.status().message().find("do not split evenly"), std::string::npos);
}

}  // namespace
}  // namespace tunableop::llm

namespace tunableop::llm {
namespace {

// The continuous-batch calls on 2 CPU ranks give the one-device engine's tokens: a packed
// prefill of two prompts (one chunked), then decode steps over both slots, one leaving early.
TEST(TensorParallelCpu, SlotCallsMatchOneDevice) {
  Context ctx(Device::cpu(), Config::defaults_only());
  auto w = std::make_shared<const ModelWeights>(make_random_weights(testing::small_llama(), 5));
  EngineOptions o = testing::options(2, 48, 8);
  o.kv_cache.kind = KvCacheKind::kPaged;
  o.kv_cache.page_size = 4;
  auto one = make_cpu_engine(w, o, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
  auto tp = make_cpu_tp_engine(w, o, std::vector<Context*>(2, &ctx));
  ASSERT_TRUE(one.is_ok() && tp.is_ok()) << tp.status().to_string();
  auto run = [](Engine& e) {
    const std::vector<int32_t> a = {3, 9, 27, 81, 50, 11, 2}, b = {7, 7, 1};
    std::vector<int32_t> next, out;
    EXPECT_TRUE(e.prefill_slots({{1, a.data(), 4}, {0, b.data(), 3}}, nullptr, &next).is_ok());
    out.push_back(next[1]);
    std::vector<int32_t> tb = {next[1]};
    EXPECT_TRUE(e.prefill_slots({{1, a.data() + 4, 3}}, nullptr, &next).is_ok());
    std::vector<int32_t> ta = {next[0]};
    out.push_back(next[0]);
    for (int s = 0; s < 5; ++s) {
      std::vector<int64_t> slots = {1};
      std::vector<int32_t> tokens = {ta[0]};
      if (s < 3) slots.push_back(0), tokens.push_back(tb[0]);
      EXPECT_TRUE(e.decode_slots(slots, tokens, nullptr, &next).is_ok());
      ta = {next[0]};
      if (s < 3) tb = {next[1]};
      out.insert(out.end(), next.begin(), next.end());
      if (s == 2) e.release_slot(0);
    }
    return out;
  };
  EXPECT_EQ(run(**tp), run(**one));
}

}  // namespace
}  // namespace tunableop::llm
