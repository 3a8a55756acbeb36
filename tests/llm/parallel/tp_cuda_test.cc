// The tensor-parallel engine on two GPUs (skipped with fewer): greedy tokens with TP=2 equal
// TP=1 on the Hugging Face fixtures (fp32, and transformers' own greedy ids) and on the
// random-weight models (bf16, the first 32 tokens at least), with CUDA-graph decode and
// without; tuned GEMMs and all-reduces on both GPUs keep the tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/generate.h"
#include "llm/llm_test_util.h"
#include "llm/parallel/tp_engine.h"
#include "llm/random_model.h"
#include "tunableop/registry.h"

namespace tunableop::llm {
namespace {

int gpu_count() {
  Context probe(Device::cuda(0), Config::defaults_only());
  const DeviceRuntime* rt = probe.registry().runtime(DeviceKind::kCuda);
  return rt ? rt->device_count() : 0;
}

class TensorParallelCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    const int n = gpu_count();
    if (n < 2) GTEST_SKIP() << "needs 2 GPUs (a CUDA build and a machine with them); found " << n;
    for (int g = 0; g < 2; ++g) ctx_.push_back(std::make_unique<Context>(Device::cuda(g), Config::defaults_only()));
  }
  std::vector<Context*> contexts() { return {ctx_[0].get(), ctx_[1].get()}; }

  // Greedy tokens of one GPU and of two, and the relative error of the last logits.
  struct Run {
    std::vector<int32_t> one, two;
    double logit_error = 1;
    bool ok = false;
  };
  Run run(const ModelSpec& spec, int64_t layers, DType dtype, const std::vector<int32_t>& prompt, int64_t steps,
          bool graph = true) {
    EngineOptions o;
    o.max_batch = 1;
    o.max_seq = 128;
    o.pad_multiple = 8;
    o.dtype = dtype;
    o.cuda_graph = graph;
    Run r;
    auto one = make_cuda_engine(spec, 7, layers, o, *ctx_[0]);
    EXPECT_TRUE(one.is_ok()) << one.status().to_string();
    auto two = make_cuda_tp_engine(spec, 7, layers, o, contexts());
    EXPECT_TRUE(two.is_ok()) << two.status().to_string();
    if (!one.is_ok() || !two.is_ok()) return r;
    auto g1 = generate(**one, {prompt}, steps);
    auto g2 = generate(**two, {prompt}, steps);
    EXPECT_TRUE(g1.is_ok()) << g1.status().to_string();
    EXPECT_TRUE(g2.is_ok()) << g2.status().to_string();
    if (!g1.is_ok() || !g2.is_ok()) return r;
    r.one = g1->tokens[0];
    r.two = g2->tokens[0];
    std::vector<float> l1, l2;
    EXPECT_TRUE((*one)->last_logits(&l1).is_ok());
    EXPECT_TRUE((*two)->last_logits(&l2).is_ok());
    r.logit_error = l1.size() == l2.size() ? testing::relative_error(l2, l1) : 1.0;
    std::printf("%s: %s\n", spec.builtin ? spec.preset.c_str() : spec.dir.c_str(), (*two)->device_name().c_str());
    r.ok = true;
    return r;
  }

  std::vector<std::unique_ptr<Context>> ctx_;
};

ModelSpec builtin(const std::string& preset) {
  ModelSpec s;
  s.builtin = true;
  s.preset = preset;
  return s;
}

const std::vector<int32_t> kPrompt = {1, 5, 17, 300, 2, 9, 4000, 12, 8, 8, 1};

TEST_F(TensorParallelCuda, HuggingFaceFixturesFp32MatchOneGpuAndTransformers) {
  const char* src = std::getenv("TUNABLEOP_SOURCE_DIR");
  const std::string root = std::string(src ? src : ".") + "/tests/fixtures/llm";
  int ran = 0;
  for (const std::string name : {"llama_gqa", "gemma_mqa", "llama_tied_sharded"}) {
    std::ifstream in(root + "/" + name + "/reference.json");
    if (!in) continue;
    const auto ref = nlohmann::json::parse(in);
    ModelSpec spec;
    spec.dir = root + "/" + name;
    const auto want = ref["greedy_ids"].get<std::vector<int32_t>>();
    for (bool graph : {true, false}) {
      Run r = run(spec, 0, DType::kF32, ref["prompt_ids"].get<std::vector<int32_t>>(), int64_t(want.size()), graph);
      ASSERT_TRUE(r.ok) << name;
      EXPECT_EQ(r.two, r.one) << name << (graph ? " (graph)" : " (eager)");
      EXPECT_EQ(r.two, want) << name << ": TP=2 against transformers";
      EXPECT_LT(r.logit_error, 1e-4) << name;
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no fixtures in " << root;
}

TEST_F(TensorParallelCuda, RandomModelsBf16SameFirst32Tokens) {
  for (const auto& [preset, layers] : std::vector<std::pair<std::string, int64_t>>{
           {"tiny", 0}, {"tiny-gemma", 0}, {"llama-2-7b", 2}, {"gemma-2b", 2}}) {
    Run r = run(builtin(preset), layers, DType::kBF16, kPrompt, 32);
    ASSERT_TRUE(r.ok) << preset;
    size_t same = 0;
    while (same < r.one.size() && same < r.two.size() && r.one[same] == r.two[same]) ++same;
    EXPECT_EQ(r.two, r.one) << preset << ": the first " << same << " tokens agree";
  }
}

TEST_F(TensorParallelCuda, TunedGemmsAndAllReducesKeepTheTokens) {
  testing::ScratchDir dir("tp_cuda_tuned");
  for (auto& c : ctx_) {
    ASSERT_TRUE(c->config().set(Setting::kEnabled, true).is_ok());
    ASSERT_TRUE(c->config().set(Setting::kFilename, dir.path() + "/results%d.csv").is_ok());
  }
  // fp32 (no TF32): tuned GEMM solutions of different shapes still agree to rounding.
  Run r = run(builtin("tiny"), 2, DType::kF32, kPrompt, 24);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.two, r.one);
  std::ifstream in(dir.path() + "/results0.csv");
  const std::string file((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(file.find("AllReduceTunableOp_float_sum,n_"), std::string::npos) << file;
}

}  // namespace
}  // namespace tunableop::llm
