// The CUDA engine against the CPU engine (same random weights: the generator is shared), the
// Hugging Face fixtures on the GPU, graph replay against eager decode, padding and batching.
// Every test skips on a machine without a CUDA GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/engine.h"
#include "llm/generate.h"
#include "llm/random_model.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

ModelSpec builtin(const std::string& preset) {
  ModelSpec s;
  s.builtin = true;
  s.preset = preset;
  return s;
}

struct GpuRun {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Engine> engine;
};

// A CUDA engine on a default-only context (every GEMM runs Default); skips the test when there
// is no GPU or no CUDA build.
#define MAKE_GPU_ENGINE(var, spec, layers, opts)                                                              \
  GpuRun var;                                                                                                 \
  var.ctx = std::make_unique<Context>(Device::cuda(0), Config::defaults_only());                              \
  {                                                                                                           \
    auto _e = make_cuda_engine((spec), 7, (layers), (opts), *var.ctx);                                        \
    if (!_e.is_ok() && _e.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << _e.status().message(); \
    ASSERT_TRUE(_e.is_ok()) << _e.status().to_string();                                                       \
    var.engine = std::move(_e.value());                                                                       \
  }

EngineOptions opts(DType dtype, int64_t batch = 1, int64_t pad = 8, bool graph = true) {
  EngineOptions o;
  o.max_batch = batch;
  o.max_seq = 96;
  o.pad_multiple = pad;
  o.dtype = dtype;
  o.cuda_graph = graph;
  return o;
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

const std::vector<int32_t> kPrompt = {1, 5, 17, 300, 2, 9, 4000, 12, 8, 8, 1};  // 11 -> padded 16

// fp32 on the GPU (cuBLAS without TF32) agrees with the CPU engine to rounding.
TEST(LlmCuda, Fp32MatchesCpuEngine) {
  for (const std::string preset : {"tiny", "tiny-gemma"}) {
    MAKE_GPU_ENGINE(gpu, builtin(preset), 2, opts(DType::kF32));
    Context cpu_ctx(Device::cpu(), Config::defaults_only());
    auto cfg = preset_config(preset);
    cfg->num_layers = 2;
    auto w = std::make_shared<const ModelWeights>(make_random_weights(*cfg, 7));
    auto cpu = make_cpu_engine(w, opts(DType::kF32), tunableop_linear(cpu_ctx), tunableop_gemm(cpu_ctx));
    ASSERT_TRUE(cpu.is_ok());
    auto g_gpu = generate(*gpu.engine, {kPrompt}, 16);
    auto g_cpu = generate(**cpu, {kPrompt}, 16);
    ASSERT_TRUE(g_gpu.is_ok()) << g_gpu.status().to_string();
    ASSERT_TRUE(g_cpu.is_ok());
    EXPECT_EQ(g_gpu->tokens[0], g_cpu->tokens[0]) << preset;
    std::vector<float> lg, lc;
    ASSERT_TRUE(gpu.engine->last_logits(&lg).is_ok());
    ASSERT_TRUE((*cpu)->last_logits(&lc).is_ok());
    EXPECT_LT(relative_error(lg, lc), 1e-4) << preset;
  }
}

// bf16 weights and activations: close to fp32, not equal. Compared at the prefill, before
// greedy paths can diverge.
TEST(LlmCuda, Bf16IsCloseToFp32) {
  MAKE_GPU_ENGINE(f32, builtin("tiny"), 2, opts(DType::kF32));
  MAKE_GPU_ENGINE(b16, builtin("tiny"), 2, opts(DType::kBF16));
  std::vector<int32_t> n32, n16;
  ASSERT_TRUE(f32.engine->prefill({kPrompt}, &n32).is_ok());
  ASSERT_TRUE(b16.engine->prefill({kPrompt}, &n16).is_ok());
  std::vector<float> l32, l16;
  ASSERT_TRUE(f32.engine->last_logits(&l32).is_ok());
  ASSERT_TRUE(b16.engine->last_logits(&l16).is_ok());
  EXPECT_LT(relative_error(l16, l32), 3e-2);
}

// A replayed graph computes exactly what the eager step computes.
TEST(LlmCuda, GraphReplayEqualsEagerDecode) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    MAKE_GPU_ENGINE(graph, builtin("tiny-gemma"), 2, opts(dt, 2, 8, true));
    MAKE_GPU_ENGINE(eager, builtin("tiny-gemma"), 2, opts(dt, 2, 8, false));
    const std::vector<std::vector<int32_t>> prompts = {kPrompt, {3, 4, 5}};
    auto a = generate(*graph.engine, prompts, 12);
    auto b = generate(*eager.engine, prompts, 12);
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    EXPECT_EQ(a->tokens, b->tokens);
    EXPECT_NE(graph.engine->device_name().find("CUDA graph decode"), std::string::npos) << graph.engine->device_name();
    std::vector<float> la, lb;
    ASSERT_TRUE(graph.engine->last_logits(&la).is_ok());
    ASSERT_TRUE(eager.engine->last_logits(&lb).is_ok());
    EXPECT_EQ(la, lb);
    // The graph's GEMMs are still counted, as if each step had called them.
    EXPECT_EQ(graph.engine->linear().calls(), eager.engine->linear().calls());
  }
}

TEST(LlmCuda, PaddingAndBatchingDoNotChangeTheResult) {
  MAKE_GPU_ENGINE(unpadded, builtin("tiny"), 2, opts(DType::kF32, 1, 1));
  MAKE_GPU_ENGINE(batched, builtin("tiny"), 2, opts(DType::kF32, 3, 8));
  auto single = generate(*unpadded.engine, {kPrompt}, 10);
  auto many = generate(*batched.engine, {{7, 7}, kPrompt, {1, 2, 3, 4, 5, 6, 7, 8, 9}}, 10);
  ASSERT_TRUE(single.is_ok() && many.is_ok());
  EXPECT_EQ(many->tokens[1], single->tokens[0]);
  EXPECT_EQ(batched.engine->padded_prompt_length(), 16);
}

// Prefill attention runs as two strided-batched GEMMs per layer through tunableop: they show up
// in the problem count next to the projections.
TEST(LlmCuda, CountsAttentionGemms) {
  MAKE_GPU_ENGINE(gpu, builtin("tiny"), 2, opts(DType::kBF16));
  ASSERT_TRUE(generate(*gpu.engine, {kPrompt}, 4).is_ok());
  int batched = 0;
  for (const auto& p : gpu.engine->linear().problems()) batched += p.op.find("StridedBatched") != std::string::npos;
  EXPECT_EQ(batched, 2);
  EXPECT_EQ(gpu.engine->linear().problems().size(), 11u);  // 4 prefill + 2 attention + lm_head + 4 decode
}

// The Hugging Face fixtures on the GPU, in fp32: greedy tokens exactly, logits within 1e-3 of
// the largest (cuBLAS's summation order differs from torch's CPU one).
TEST(LlmCuda, MatchesTransformersFixtures) {
  const char* src = std::getenv("TUNABLEOP_SOURCE_DIR");
  const std::string root = std::string(src ? src : ".") + "/tests/fixtures/llm";
  int ran = 0;
  for (const std::string name : {"llama_gqa", "gemma_mqa", "llama_tied_sharded"}) {
    const std::string dir = root + "/" + name;
    if (!std::filesystem::exists(dir + "/reference.json")) continue;
    std::ifstream in(dir + "/reference.json");
    nlohmann::json ref = nlohmann::json::parse(in);
    ModelSpec spec;
    spec.dir = dir;
    MAKE_GPU_ENGINE(gpu, spec, 0, opts(DType::kF32));
    const auto prompt = ref["prompt_ids"].get<std::vector<int32_t>>();
    const auto want_logits = ref["last_logits"].get<std::vector<double>>();
    const auto want_ids = ref["greedy_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> next;
    ASSERT_TRUE(gpu.engine->prefill({prompt}, &next).is_ok());
    std::vector<float> got;
    ASSERT_TRUE(gpu.engine->last_logits(&got).is_ok());
    double scale = 1, worst = 0;
    for (double v : want_logits) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - want_logits[i]));
    EXPECT_LE(worst, 1e-3 * scale) << name;
    auto g = generate(*gpu.engine, {prompt}, int64_t(want_ids.size()));
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    EXPECT_EQ(g->tokens[0], want_ids) << name;
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no fixtures: run scripts/make_llm_fixtures.py --out tests/fixtures/llm";
}

}  // namespace
}  // namespace tunableop::llm
