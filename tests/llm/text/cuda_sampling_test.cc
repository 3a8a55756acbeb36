// Sampling on the CUDA engine (host sampler over last_logits): top-k = 1 equals the device's
// greedy argmax, a seed reproduces its tokens with the decode graph replayed and eagerly, fp32 on
// the GPU samples what the CPU engine samples, and EOS stops a sequence. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/generate.h"
#include "llm/random_model.h"
#include "llm/text/generation_loop.h"
#include "llm_test_util.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

const std::vector<int32_t> kPrompt = {1, 5, 17, 300, 2, 9, 4000, 12, 8, 8, 1};

struct Gpu {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Engine> engine;
};

EngineOptions gpu_options(DType dtype, bool graph, int64_t batch = 1) {
  EngineOptions o = testing::options(batch, 96, 8);
  o.dtype = dtype;
  o.cuda_graph = graph;
  return o;
}

// The built-in tiny model (2 layers) on the GPU; skips the test where there is none.
#define MAKE_GPU(var, dtype, graph, batch)                                                                          \
  Gpu var;                                                                                                          \
  {                                                                                                                 \
    var.ctx = std::make_unique<Context>(Device::cuda(0), Config::defaults_only());                                  \
    ModelSpec spec;                                                                                                 \
    spec.builtin = true;                                                                                            \
    spec.preset = "tiny";                                                                                           \
    auto made = make_cuda_engine(spec, 7, 2, gpu_options(dtype, graph, batch), *var.ctx);                           \
    if (!made.is_ok() && made.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << made.status().message(); \
    ASSERT_TRUE(made.is_ok()) << made.status().to_string();                                                         \
    var.engine = std::move(made.value());                                                                           \
  }

std::vector<std::vector<int32_t>> sample(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                         SamplingOptions s, StopOptions stop = {24, {}, false}) {
  auto selector = make_token_selector(s);
  auto g = generate_until_stop(engine, prompts, stop, *selector);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  std::vector<std::vector<int32_t>> out;
  if (g.is_ok()) {
    for (const auto& seq : g->sequences) out.push_back(seq.tokens);
  }
  return out;
}

SamplingOptions at(double temperature, uint64_t seed, int64_t top_k = 0, double top_p = 1) {
  SamplingOptions s;
  s.temperature = temperature;
  s.seed = seed;
  s.top_k = top_k;
  s.top_p = top_p;
  return s;
}

TEST(LlmCudaSampling, TopKOneEqualsTheDeviceArgmax) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    MAKE_GPU(gpu, dt, true, 1);
    auto greedy = generate(*gpu.engine, {kPrompt}, 24);
    ASSERT_TRUE(greedy.is_ok());
    EXPECT_EQ(sample(*gpu.engine, {kPrompt}, at(0.7, 3, 1))[0], greedy->tokens[0]) << dtype_name(dt);
  }
}

TEST(LlmCudaSampling, SeedReproducesWithTheGraphAndEagerly) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    MAKE_GPU(graph, dt, true, 2);
    MAKE_GPU(eager, dt, false, 2);
    const std::vector<std::vector<int32_t>> prompts = {kPrompt, {3, 4, 5}};
    auto a = sample(*graph.engine, prompts, at(1.0, 11, 50, 0.95));
    auto b = sample(*graph.engine, prompts, at(1.0, 11, 50, 0.95));
    auto c = sample(*eager.engine, prompts, at(1.0, 11, 50, 0.95));
    auto d = sample(*graph.engine, prompts, at(1.0, 12, 50, 0.95));
    EXPECT_EQ(a, b) << dtype_name(dt);
    EXPECT_EQ(a, c) << dtype_name(dt) << ": graph replay and eager decode sampled differently";
    EXPECT_NE(a, d) << dtype_name(dt);
    EXPECT_NE(graph.engine->device_name().find("CUDA graph decode"), std::string::npos) << graph.engine->device_name();
  }
}

// fp32 logits on the GPU equal the CPU's to ~1e-6, so the same seed draws the same tokens
// (a draw within that distance of a boundary would differ; the seed is fixed, so it does not).
TEST(LlmCudaSampling, Fp32SamplesWhatTheCpuSamples) {
  MAKE_GPU(gpu, DType::kF32, true, 1);
  Context cpu_ctx(Device::cpu(), Config::defaults_only());
  auto cfg = preset_config("tiny");
  cfg->num_layers = 2;
  auto w = std::make_shared<const ModelWeights>(make_random_weights(*cfg, 7));
  auto cpu = make_cpu_engine(w, testing::options(1, 96, 8), tunableop_linear(cpu_ctx), tunableop_gemm(cpu_ctx));
  ASSERT_TRUE(cpu.is_ok());
  EXPECT_EQ(sample(*gpu.engine, {kPrompt}, at(0.9, 5)), sample(**cpu, {kPrompt}, at(0.9, 5)));
}

TEST(LlmCudaSampling, EosStopsASequence) {
  MAKE_GPU(gpu, DType::kBF16, true, 2);
  const std::vector<std::vector<int32_t>> prompts = {kPrompt, {3, 4, 5}};
  auto free_run = sample(*gpu.engine, prompts, at(1.0, 21));
  const int32_t eos = free_run[1][3];
  auto stopped = sample(*gpu.engine, prompts, at(1.0, 21), {24, {eos}, false});
  const size_t n = size_t(std::find(free_run[1].begin(), free_run[1].end(), eos) - free_run[1].begin()) + 1;
  EXPECT_EQ(stopped[1], std::vector<int32_t>(free_run[1].begin(), free_run[1].begin() + ptrdiff_t(n)));
}

// The Hugging Face text fixture (scripts/make_llm_text_fixture.py) on the GPU in fp32: the
// greedy ids transformers produced, through generation that stops (ignoring EOS, as the
// reference does).
TEST(LlmCudaSampling, HuggingFaceTextFixtureGreedyIds) {
  const char* src = std::getenv("TUNABLEOP_SOURCE_DIR");
  const std::string dir = std::string(src ? src : ".") + "/tests/fixtures/llm/llama_spm";
  if (!std::filesystem::exists(dir + "/reference_text.json")) {
    GTEST_SKIP() << dir << "/reference_text.json is missing: run scripts/make_llm_text_fixture.py";
  }
  std::ifstream in(dir + "/reference_text.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  Context ctx(Device::cuda(0), Config::defaults_only());
  ModelSpec spec;
  spec.dir = dir;
  auto made = make_cuda_engine(spec, 0, 0, gpu_options(DType::kF32, true), ctx);
  if (!made.is_ok() && made.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << made.status().message();
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  for (const auto& c : ref["cases"]) {
    const auto want = c["greedy_ids"].get<std::vector<int32_t>>();
    auto got = sample(**made, {c["prompt_ids"].get<std::vector<int32_t>>()}, SamplingOptions{},
                      {int64_t(want.size()), {2}, true});
    EXPECT_EQ(got[0], want) << c["prompt"];
  }
}

}  // namespace
}  // namespace tunableop::llm
