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
                 << "on a machine with torch and transformers, then commit tests/fixtures/llm";
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

  for (int64_t pad : {int64_t(8), int64_t(1)}) {
    Context ctx(Device::cpu(), Config::defaults_only());
    auto engine = make_cpu_engine(shared, testing::options(1, 64, pad), tunableop_linear(ctx), tunableop_gemm(ctx));
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

INSTANTIATE_TEST_SUITE_P(Fixtures, HfReference, ::testing::Values("llama_gqa", "gemma_mqa", "llama_tied_sharded"));

}  // namespace
}  // namespace tunableop::llm
