// The CUDA engine with --dtype fp8 (EngineOptions::fp8; docs/llm.md, "FP8"): against the fp32
// transformers fixtures, teacher-forced over 64 positions (the fp32 CPU engine, which matches
// transformers to 2e-4 in reference_test.cc, gives the positions past the fixture's prompt),
// held to the thresholds of tests/llm/fp8_accuracy.h; a real-shaped model against its bf16
// engine; the ScaledGemm problems counted and written to the results file. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cuda_engine_util.h"
#include "fp8_accuracy.h"
#include "llm/engine.h"
#include "llm/weights.h"
#include "llm_test_util.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

using cuda_test::GpuRun;

EngineOptions fp8_options(bool lm_head, int64_t page = 0, bool graph = true) {
  EngineOptions o = cuda_test::opts(DType::kBF16, 1, 8, graph);
  o.fp8.projections = true;
  o.fp8.lm_head = lm_head;
  return page ? cuda_test::paged(o, page) : o;
}

TEST(LlmCudaFp8, MatchesTransformersFixturesTeacherForced) {
  int ran = 0;
  for (const testing::Fp8Fixture& f : testing::committed_fp8_fixtures()) {
    const std::string& dir = f.dir;
    const nlohmann::json& ref = f.ref;
    const char* name = f.name.c_str();
    SCOPED_TRACE(name);
    const auto prompt = ref["prompt_ids"].get<std::vector<int32_t>>();
    const auto hf_last = ref["last_logits"].get<std::vector<float>>();
    auto loaded = load_model(dir);
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    auto weights = std::make_shared<const ModelWeights>(std::move(loaded.value()));
    Context cpu(Device::cpu(), Config::defaults_only());
    auto reference = make_cpu_engine(weights, testing::options(1, 96, 8), tunableop_linear(cpu), tunableop_gemm(cpu),
                                     tunableop_attention(cpu));
    ASSERT_TRUE(reference.is_ok()) << reference.status().to_string();
    std::vector<int32_t> forced = ref["greedy_ids"].get<std::vector<int32_t>>();
    std::vector<std::vector<float>> want;
    ASSERT_TRUE(testing::extend_greedy(**reference, prompt, &forced, 64, &want).is_ok());

    ModelSpec spec;
    spec.dir = dir;
    struct Way {
      bool lm_head;
      int64_t page;
      bool graph;
    };
    for (const Way w : {Way{false, 0, true}, Way{true, 0, true}, Way{false, 4, false}}) {
      const std::string way = std::string(w.lm_head ? "fp8-all" : "fp8") + (w.page ? ", paged, eager" : ", static");
      SCOPED_TRACE(way);
      MAKE_GPU_ENGINE(gpu, spec, 0, fp8_options(w.lm_head, w.page, w.graph));
      std::vector<std::vector<float>> got;
      ASSERT_TRUE(testing::teacher_forced_logits(*gpu.engine, prompt, forced, &got).is_ok());
      const testing::Fp8Accuracy a = testing::compare_logits(got, want);
      const testing::Fp8Accuracy first = testing::compare_logits({got[0]}, {hf_last});
      std::printf("%s %s: %s; the prompt's last position against transformers: %s\n", name, way.c_str(),
                  a.to_string().c_str(), first.to_string().c_str());
      EXPECT_EQ(a.positions, int64_t(64 - prompt.size() + 1));
      testing::expect_fp8_accuracy(a, std::string(name) + " " + way);
      EXPECT_GE(first.min_cosine, testing::kFp8MinCosine) << first.to_string();
      EXPECT_LE(first.max_relative_delta_log_prob, testing::kFp8MaxDeltaLogProb) << first.to_string();
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no fixtures in " << testing::fp8_fixture_root();
}

// Real shapes (Llama-2-7B's and Gemma-2B's first two layers, random weights): the GEMMs take
// cuBLASLt's FP8 kernels and the decode kernels (the fixtures' odd widths take the simt one),
// against the bf16 engine on the same weights, teacher-forced along the bf16 engine's tokens.
TEST(LlmCudaFp8, RealShapesFollowTheBf16Engine) {
  for (const char* preset : {"llama-2-7b", "gemma-2b"}) {
    SCOPED_TRACE(preset);
    const std::vector<int32_t>& prompt = cuda_test::kPrompt;
    std::vector<std::vector<float>> want, got;
    std::vector<int32_t> forced;
    {
      MAKE_GPU_ENGINE(bf16, cuda_test::builtin(preset), 2, cuda_test::opts(DType::kBF16));
      ASSERT_TRUE(testing::extend_greedy(*bf16.engine, prompt, &forced, 40, &want).is_ok());
    }
    MAKE_GPU_ENGINE(fp8, cuda_test::builtin(preset), 2, fp8_options(false));
    ASSERT_TRUE(testing::teacher_forced_logits(*fp8.engine, prompt, forced, &got).is_ok());
    const testing::Fp8Accuracy a = testing::compare_logits(got, want);
    std::printf("%s (2 layers): fp8 against bf16: %s\n", preset, a.to_string().c_str());
    // Random weights give flat logits (near-ties everywhere): the cosine only.
    EXPECT_GE(a.min_cosine, testing::kFp8MinCosine) << a.to_string();
  }
}

// Every projection is a ScaledGemm problem (the lm_head a bf16 GEMM unless fp8-all), tuned and
// written to the results file in PyTorch's layout; a second engine serves them from the file.
TEST(LlmCudaFp8, ProjectionsAreScaledGemmProblemsInTheResultsFile) {
  testing::ScratchDir dir("llm_fp8_results");
  // %d is the device ordinal (a name without it gets the ordinal before the extension, as
  // PyTorch names it).
  const std::string pattern = dir.path() + "/results%d.csv", file = dir.path() + "/results0.csv";
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "tuned" : "served");
    Context ctx(Device::cuda(0), testing::quick_tuning_config(pattern, pass == 0));
    auto made = make_cuda_engine(cuda_test::builtin("tiny"), 7, 2, fp8_options(false), ctx);
    if (!made.is_ok() && made.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << made.status().message();
    ASSERT_TRUE(made.is_ok()) << made.status().to_string();
    Engine* e = made->get();
    std::vector<int32_t> next;
    ASSERT_TRUE(e->prefill({{1, 2, 3, 4, 5}}, &next).is_ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(e->decode({next[0]}, &next).is_ok());
    int scaled = 0, gemm = 0;
    for (const LinearOp::Problem& p : e->linear().problems()) {
      if (p.op.rfind("ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN", 0) == 0) ++scaled;
      if (p.op.rfind("GemmTunableOp_BFloat16_TN", 0) == 0) ++gemm;
    }
    EXPECT_GE(scaled, 4) << "qkv, o, gate_up, down (prefill and decode rows)";
    EXPECT_EQ(gemm, 1) << "the lm_head (bf16), the same problem in prefill and decode";
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN,tn_"), std::string::npos)
        << text.str();
    EXPECT_NE(e->device_name().find("e4m3 projections"), std::string::npos) << e->device_name();
  }
}

}  // namespace
}  // namespace tunableop::llm
