// The engine against Hugging Face transformers: tiny random Llama (GQA) and Gemma (MQA) models
// and their reference outputs, made by scripts/make_llm_fixtures.py (torch, fp32, CPU).
//
// Tolerance: the last-position logits agree to 2e-4 x max(1, max |reference logit|). Both
// sides compute in fp32 with different summation orders; observed differences are ~1e-6
// relative, so the bound has two orders of magnitude of room while a wrong op (a missing
// (1 + w), a wrong RoPE pairing, a GQA mix-up) moves logits by O(1). Greedy tokens must match
// exactly: the script only accepts models whose top-1 margins are clear.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/engine.h"
#include "llm/generate.h"
#include "llm/weights.h"
#include "llm_test_util.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

std::string fixtures_dir() {
  const char* src = std::getenv("TUNABLEOP_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/fixtures/llm";
}

constexpr double kLogitTolerance = 2e-4;

class HfReference : public ::testing::TestWithParam<std::string> {};

TEST_P(HfReference, MatchesTransformers) {
  const std::string dir = fixtures_dir() + "/" + GetParam();
  const std::string ref_path = dir + "/reference.json";
  if (!std::filesystem::exists(ref_path)) {
    GTEST_SKIP() << ref_path << " is missing: run `python3 scripts/make_llm_fixtures.py --out tests/fixtures/llm` "
                 << "on a machine with torch and transformers 5.x (scripts/gpu-models.sh does), then commit "
                 << "tests/fixtures/llm/" << GetParam();
  }
  std::ifstream in(ref_path);
  nlohmann::json ref = nlohmann::json::parse(in);
  auto weights = load_model(dir);
  ASSERT_TRUE(weights.is_ok()) << weights.status().to_string();
  auto shared = std::make_shared<const ModelWeights>(std::move(weights.value()));

  const std::vector<int32_t> prompt = ref["prompt_ids"].get<std::vector<int32_t>>();
  const std::vector<double> want_logits = ref["last_logits"].get<std::vector<double>>();
  const std::vector<int32_t> want_ids = ref["greedy_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(int64_t(want_logits.size()), shared->config.vocab_size);

  // Attention through the op (Default on a default-only context) on a static and a paged cache
  // (pages of 4: the prompt spans several), and the GEMM path the CPU keeps without the op.
  // `tuned`: tuning on (into a scratch results file), so the fastest attention candidate (the
  // fused kernel, typically) serves the run.
  struct Way {
    int64_t pad, page;
    bool op, tuned;
  };
  for (const Way w : {Way{8, 0, true, false}, Way{1, 0, true, false}, Way{8, 4, true, false}, Way{1, 4, true, false},
                      Way{8, 16, true, true}, Way{8, 0, false, false}}) {
    const int64_t pad = w.pad;
    SCOPED_TRACE(std::string(w.op ? "attention op" : "attention GEMMs") + (w.page ? ", paged" : ", static") +
                 (w.tuned ? ", tuned" : ""));
    testing::ScratchDir dir("hf_tuned");
    Config cfg = Config::defaults_only();
    if (w.tuned) {
      const std::string file = dir.path() + "/results.csv";
      EXPECT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
      EXPECT_TRUE(cfg.set(Setting::kTuning, true).is_ok());
      EXPECT_TRUE(cfg.set(Setting::kFilename, file.c_str()).is_ok());
      EXPECT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, int64_t(2)).is_ok());
      EXPECT_TRUE(cfg.set(Setting::kMaxWarmupDurationMs, int64_t(1)).is_ok());
    }
    Context ctx(Device::cpu(), std::move(cfg));
    EngineOptions o = testing::options(1, 64, pad);
    if (w.page) o.kv_cache.kind = KvCacheKind::kPaged, o.kv_cache.page_size = w.page;
    auto engine = make_cpu_engine(shared, o, tunableop_linear(ctx), tunableop_gemm(ctx),
                                  w.op ? tunableop_attention(ctx) : LinearOp::AttentionFn{});
    ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
    std::vector<int32_t> next;
    ASSERT_TRUE((*engine)->prefill({prompt}, &next).is_ok());
    std::vector<float> got;
    ASSERT_TRUE((*engine)->last_logits(&got).is_ok());
    double scale = 1, worst = 0;
    for (double v : want_logits) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - want_logits[i]));
    EXPECT_LE(worst, kLogitTolerance * scale) << GetParam() << " pad " << pad << ": max |logit - reference| = " << worst
                                              << " (largest logit " << scale << ")";
    auto g = generate(**engine, {prompt}, int64_t(want_ids.size()));
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    EXPECT_EQ(g->tokens[0], want_ids) << GetParam() << " pad " << pad;
  }
}

// The families' fixtures (scripts/make_llm_fixtures.py): llama3 RoPE with a vocabulary of 8192,
// Mistral's window of 5 under an 11-token prompt, Qwen2's biases and YaRN, Qwen3's head norms,
// Gemma-2's softcapping, post-norms and alternating windows.
INSTANTIATE_TEST_SUITE_P(Fixtures, HfReference,
                         ::testing::Values("llama_gqa", "gemma_mqa", "llama_tied_sharded", "llama3_rope",
                                           "mistral_window", "qwen2_bias", "qwen3_qknorm", "gemma2_softcap"));

}  // namespace
}  // namespace tunableop::llm
