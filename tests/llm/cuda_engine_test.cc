// The CUDA engine against the CPU engine (same random weights: the generator is shared), graph
// replay against eager decode, padding and batching, tuned attention and the prefill gate (the
// Hugging Face fixtures and the families: cuda_engine_families_test.cc).
// Every test skips on a machine without a CUDA GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cuda_engine_util.h"
#include "llm/engine.h"
#include "llm/generate.h"
#include "llm/random_model.h"
#include "llm_test_util.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

using namespace cuda_test;

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
  using Mode = std::pair<DType, EngineOptions::Fusion>;
  for (auto [dt, fusion] : {Mode{DType::kF32, kUnfused}, Mode{DType::kBF16, kUnfused}, Mode{DType::kBF16, kFused}}) {
    MAKE_GPU_ENGINE(graph, builtin("tiny-gemma"), 2, opts(dt, 2, 8, true, fusion));
    MAKE_GPU_ENGINE(eager, builtin("tiny-gemma"), 2, opts(dt, 2, 8, false, fusion));
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

// Prefill graphs (issue 12): the second prefill of a shape is captured and launched, later ones
// replay it; a new shape runs eagerly and drops the graphs. Different prompts of one shape
// (ragged and not) through the graph give exactly the eager engine's tokens and logits, and
// decode goes on from the cache the graph wrote.
TEST(LlmCuda, PrefillGraphReplaysTheEagerPrefill) {
  for (auto fusion : {kUnfused, kFused}) {
    auto with_graph = opts(DType::kBF16, 2, 8, true, fusion), without = with_graph;
    with_graph.prefill_graph = true;  // the default (engine.h)
    without.prefill_graph = false;
    MAKE_GPU_ENGINE(graph, builtin("tiny-gemma"), 2, with_graph);
    MAKE_GPU_ENGINE(eager, builtin("tiny-gemma"), 2, without);
    std::vector<int32_t> full(16), full2(16);
    for (int i = 0; i < 16; ++i) full[size_t(i)] = 100 + 7 * i, full2[size_t(i)] = 3000 - 11 * i;
    const std::vector<std::vector<int32_t>> p1 = {kPrompt, {3, 4, 5}};
    const std::vector<std::vector<int32_t>> p2 = {{7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, {20, 21}};
    const std::vector<std::vector<int32_t>> p3 = {full, full2};  // 16: same length, not ragged
    int round = 0;
    for (const auto* prompts : {&p1, &p2, &p1, &p2, &p3, &p2, &p1}) {
      SCOPED_TRACE("round " + std::to_string(round++));
      expect_same_generation(*graph.engine, *eager.engine, *prompts, 4);
      // The prefill alone, through the graph when it has one: its next tokens and logits.
      std::vector<float> la, lb;
      std::vector<int32_t> na, nb;
      ASSERT_TRUE(graph.engine->prefill(*prompts, &na).is_ok());
      ASSERT_TRUE(eager.engine->prefill(*prompts, &nb).is_ok());
      EXPECT_EQ(na, nb);
      ASSERT_TRUE(graph.engine->last_logits(&la).is_ok());
      ASSERT_TRUE(eager.engine->last_logits(&lb).is_ok());
      EXPECT_EQ(la, lb);
    }
    EXPECT_NE(graph.engine->device_name().find("CUDA graph prefill"), std::string::npos) << graph.engine->device_name();
    EXPECT_EQ(eager.engine->device_name().find("CUDA graph prefill"), std::string::npos);
    // The graph's GEMMs are counted as if each prefill had called them.
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

// Attention is the Attention op, not GEMMs: 9 GEMM problems (4 projections at prompt rows and at
// batch rows, lm_head) and 2 attention problems (prefill, decode against the whole cache).
TEST(LlmCuda, CountsAttentionProblems) {
  MAKE_GPU_ENGINE(gpu, builtin("tiny"), 2, opts(DType::kBF16));
  ASSERT_TRUE(generate(*gpu.engine, {kPrompt}, 4).is_ok());
  EXPECT_EQ(gpu.engine->linear().problems().size(), 9u);
  const auto attention = gpu.engine->linear().attention_problems();
  ASSERT_EQ(attention.size(), 2u);
  EXPECT_EQ(attention[0].op, "AttentionTunableOp_BFloat16_causal");
  EXPECT_EQ(attention[1].params, "b1_q1_k96_h8_kv2_d64_vk_qs768");
}

// Fused decode projections (rmsnorm prologue, residual / gated / argmax epilogue) against the
// unfused path: fp32 to rounding (same tokens), bf16 close; batches of 1 and 3 (n = 1, 3).
TEST(LlmCuda, FusedProjectionsMatchUnfused) {
  for (const std::string preset : {"tiny", "tiny-gemma"}) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (int64_t batch : {int64_t(1), int64_t(3)}) {
        SCOPED_TRACE(preset + (dt == DType::kF32 ? " fp32" : " bf16") + " batch " + std::to_string(batch));
        MAKE_GPU_ENGINE(fused, builtin(preset), 2, opts(dt, batch, 8, true, kFused));
        MAKE_GPU_ENGINE(plain, builtin(preset), 2, opts(dt, batch, 8, true, kUnfused));
        std::vector<std::vector<int32_t>> prompts(size_t(batch), kPrompt);
        if (batch > 1) prompts[1] = {3, 4, 5};
        std::vector<int32_t> nf, np;
        ASSERT_TRUE(fused.engine->prefill(prompts, &nf).is_ok());
        ASSERT_TRUE(plain.engine->prefill(prompts, &np).is_ok());
        ASSERT_EQ(nf, np);  // prefill is never fused
        for (int step = 0; step < 6; ++step) {
          ASSERT_TRUE(fused.engine->decode(np, &nf).is_ok());
          std::vector<int32_t> in = np;
          ASSERT_TRUE(plain.engine->decode(in, &np).is_ok());
          std::vector<float> lf, lp;
          ASSERT_TRUE(fused.engine->last_logits(&lf).is_ok());
          ASSERT_TRUE(plain.engine->last_logits(&lp).is_ok());
          EXPECT_LT(relative_error(lf, lp), dt == DType::kF32 ? 1e-5 : 2e-2) << "step " << step;
          if (dt == DType::kF32) {
            EXPECT_EQ(nf, np) << "step " << step;
          }
          np = nf;  // both continue from the same tokens
        }
        EXPECT_NE(fused.engine->kernel_choices().find(": fused Default"), std::string::npos)
            << "kOn with TunableOp off: the op's Default\n"
            << fused.engine->kernel_choices();
      }
    }
  }
}

// With TunableOp on, kAuto times the fused shapes against the unfused path once per
// projection, keeps the fastest, and computes the same tokens (fp32).
TEST(LlmCuda, AutoFusionChoosesByMeasurement) {
  const auto dir = std::filesystem::temp_directory_path() / "tunableop_llm_auto_fusion";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  MAKE_GPU_ENGINE(plain, builtin("tiny-gemma"), 2, opts(DType::kF32, 1, 8, true, kUnfused));
  GpuRun tuned;
  tuned.ctx = std::make_unique<Context>(Device::cuda(0), Config::defaults_only());
  ASSERT_TRUE(tuned.ctx->config().set(Setting::kEnabled, true).is_ok());
  ASSERT_TRUE(tuned.ctx->config().set(Setting::kTuning, true).is_ok());
  ASSERT_TRUE(tuned.ctx->config().set(Setting::kFilename, (dir / "results_%d.csv").string()).is_ok());
  auto e = make_cuda_engine(builtin("tiny-gemma"), 7, 2, opts(DType::kF32), *tuned.ctx);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  tuned.engine = std::move(e.value());
  auto a = generate(*tuned.engine, {kPrompt}, 8);
  auto b = generate(*plain.engine, {kPrompt}, 8);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(a->tokens, b->tokens);
  const std::string choices = tuned.engine->kernel_choices();
  for (const char* site : {"qkv", "o ", "gate_up", "down", "lm_head"}) {
    EXPECT_NE(choices.find(site), std::string::npos) << site << " in\n" << choices;
  }
  EXPECT_NE(choices.find("unfused"), std::string::npos) << "the unfused path is a timed candidate\n" << choices;
  EXPECT_NE(choices.find("decode step b1:"), std::string::npos) << "step variants timed\n" << choices;
  // The fused projections' shapes were tuned as FusedLinear problems, into the results file.
  std::ifstream results(dir / "results_0.csv");  // %d is the device ordinal
  ASSERT_TRUE(results.good()) << "no results file in " << dir;
  std::stringstream text;
  text << results.rdbuf();
  EXPECT_NE(text.str().find("FusedLinearTunableOp_float,out_"), std::string::npos) << text.str();
  // So was decode attention, at full length, before the first capture.
  EXPECT_NE(text.str().find("AttentionTunableOp_float_causal,b1_q1_k96_"), std::string::npos) << text.str();
  // And the step's build, through the core tuner (graph_runner.h).
  EXPECT_NE(text.str().find("DecodeStepTunableOp_float,gemma_l2_"), std::string::npos) << text.str();
  std::filesystem::remove_all(dir);
}

// Every step variant (fused or not, PDL off / early / late, L2 prefetch, RoPE in the qkv epilogue)
// computes what the eager step of its kind computes, bit for bit: launch order and prefetches
// change no arithmetic, and the fused RoPE rounds as rope_kv's kernel does.
TEST(LlmCuda, EveryStepVariantReplaysTheEagerStep) {
  const std::vector<std::vector<int32_t>> prompts = {kPrompt, {3, 4, 5}};
  std::vector<float> want[2];
  std::vector<std::vector<int32_t>> want_tokens[2];
  for (int fused = 0; fused < 2; ++fused) {
    MAKE_GPU_ENGINE(eager, builtin("tiny-gemma"), 2, opts(DType::kBF16, 2, 8, false, fused ? kFused : kUnfused));
    auto g = generate(*eager.engine, prompts, 8);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    want_tokens[fused] = g->tokens;
    ASSERT_TRUE(eager.engine->last_logits(&want[fused]).is_ok());
  }
  for (int v = 0; v < 34; ++v) {  // every variant on sm_90 (cuda::step_variants)
    for (int fused = 0; fused < 2; ++fused) {
      EngineOptions o = opts(DType::kBF16, 2, 8, true, fused ? kFused : kUnfused);
      o.step_variant = v;
      MAKE_GPU_ENGINE(gpu, builtin("tiny-gemma"), 2, o);
      auto g = generate(*gpu.engine, prompts, 8);
      ASSERT_TRUE(g.is_ok()) << g.status().to_string();
      std::vector<float> logits;
      ASSERT_TRUE(gpu.engine->last_logits(&logits).is_ok());
      // An unfused variant of a fused engine runs the unfused kernels.
      const bool variant_fused = gpu.engine->device_name().find("step: fused") != std::string::npos;
      EXPECT_EQ(variant_fused, fused == 1 && v >= 2) << gpu.engine->device_name();  // on sm_90: 0, 1 unfused
      EXPECT_EQ(g->tokens, want_tokens[variant_fused ? 1 : 0]) << "variant " << v << " fused engine " << fused;
      EXPECT_EQ(logits, want[variant_fused ? 1 : 0]) << "variant " << v << " fused engine " << fused;
    }
  }
}

// A profiled step names each kernel; with fused projections the projections are one kernel each.
TEST(LlmCuda, ProfileNamesTheKernelsOfAStep) {
  for (auto fusion : {kUnfused, kFused}) {
    MAKE_GPU_ENGINE(gpu, builtin("tiny-gemma"), 2, opts(DType::kBF16, 1, 8, true, fusion));
    auto prof = profile_decode_steps(*gpu.engine, {kPrompt}, 2, 3);
    ASSERT_TRUE(prof.is_ok()) << prof.status().to_string();
    EXPECT_EQ(prof->steps, 3);
    EXPECT_EQ(prof->position, int64_t(kPrompt.size()) + 2);
    std::string labels;
    for (const auto& r : prof->rows) labels += r.label + ";";
    for (const char* want : {"embedding", "rope_kv", "attention", "qkv", "gate_up", "lm_head"}) {
      EXPECT_NE(labels.find(want), std::string::npos) << want << " in " << labels;
    }
    EXPECT_EQ(labels.find("fused") != std::string::npos, fusion == kFused) << labels;
    EXPECT_GT(prof->matmul_ms, 0);
    EXPECT_GT(prof->other_ms, 0);
    for (const auto& r : prof->rows) EXPECT_GE(r.ms, 0) << r.label;
  }
}

// A profiled prefill (issue 12) is an ordinary prefill with events between its kernels: the
// same tokens and logits. It is queued behind a 20 ms busy kernel, so a host that queued the
// whole pass in less than that never waited on the GPU part-way (no per-layer synchronisation).
TEST(LlmCuda, ProfiledPrefillMatchesPrefillAndNeverWaitsOnTheGpu) {
  for (const std::string preset : {"tiny", "tiny-gemma"}) {
    MAKE_GPU_ENGINE(gpu, builtin(preset), 2, opts(DType::kBF16));
    std::vector<int32_t> want, got;
    ASSERT_TRUE(gpu.engine->prefill({kPrompt}, &want).is_ok());
    std::vector<float> want_logits, got_logits;
    ASSERT_TRUE(gpu.engine->last_logits(&want_logits).is_ok());
    double host_ms = -1;
    auto spans = gpu.engine->profile_prefill({kPrompt}, &got, &host_ms);
    ASSERT_TRUE(spans.is_ok()) << spans.status().to_string();
    ASSERT_TRUE(gpu.engine->last_logits(&got_logits).is_ok());
    EXPECT_EQ(got, want) << preset;
    EXPECT_EQ(got_logits, want_logits) << preset;
    EXPECT_GE(host_ms, 0);
    EXPECT_LT(host_ms, 15.0) << preset << ": the host waited on the GPU while queueing the prefill";
    double gemm_flops = 0;
    for (const ProfileSpan& s : *spans) {
      EXPECT_GE(s.ms, 0) << s.label;
      if (s.matmul) gemm_flops += s.flops;
    }
    EXPECT_GT(gemm_flops, 0) << preset;
  }
}

TEST(LlmCuda, MeasuresTheCopyBandwidth) {
  MAKE_GPU_ENGINE(gpu, builtin("tiny"), 1, opts(DType::kBF16));
  auto bw = gpu.engine->copy_bandwidth_gbps();
  ASSERT_TRUE(bw.is_ok()) << bw.status().to_string();
  EXPECT_GT(*bw, 50.0);  // any GPU of this decade
}

// The paged cache gives the static cache's results (Default attention reads both through the
// same gather: identical bits), with the decode graph replaying block-table reads, over two
// generations (pages freed by the first come back shuffled for the second).
TEST(LlmCuda, PagedCacheEqualsStatic) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    MAKE_GPU_ENGINE(st, builtin("tiny-gemma"), 2, opts(dt, 3, 8, true));
    MAKE_GPU_ENGINE(pg, builtin("tiny-gemma"), 2, paged(opts(dt, 3, 8, true), 16));
    for (const auto& prompts : std::vector<std::vector<std::vector<int32_t>>>{
             {kPrompt, {3, 4, 5}, {9}},
             {{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}, {1}, kPrompt}}) {
      expect_same_generation(*st.engine, *pg.engine, prompts, 20);
    }
    EXPECT_NE(pg.engine->device_name().find("CUDA graph decode"), std::string::npos) << pg.engine->device_name();
    const KvCacheStats s = pg.engine->kv_cache_stats();
    EXPECT_EQ(s.kind, KvCacheKind::kPaged);
    EXPECT_LT(s.peak_in_use, st.engine->kv_cache_stats().allocated);
  }
}

// RoPE and the KV-cache write in the qkv projection's epilogue (the "RoPE in qkv" step
// variants), Gemma's and Llama's tiny shapes, fp32 and bf16, static and paged caches: the tokens
// and logits (bit for bit: both rotate through rope_rotate) of the same engine with rope_kv's
// kernel, over two generations (pages come back shuffled) of a ragged batch. (The fp32 logits of
// the first version's kernels were one ulp apart: nvcc contracted the rotation into different
// FMAs in the two kernels.)
TEST(LlmCuda, RopeInQkvEqualsRopeKv) {
  // cuda::step_variants on sm_90: 9 = fused, PDL early, L2 prefetch 2; 13 = the same, RoPE in qkv.
  const int rope = 13, plain = 9;
  for (int run = 0; run < 8; ++run) {  // Gemma's MQA, head_dim 256 / Llama's (tiny: GQA)
    const std::string preset = run < 4 ? "tiny-gemma" : "tiny";
    const int page = run % 2 ? 16 : 0;
    const DType dt = run % 4 < 2 ? DType::kF32 : DType::kBF16;
    SCOPED_TRACE(preset + (page ? ", paged, " : ", static, ") + (dt == DType::kF32 ? "fp32" : "bf16"));
    const EngineOptions base = opts(dt, 3, 8, true, kFused);
    EngineOptions with = page ? paged(base, page) : base, without = with;
    with.step_variant = rope;
    without.step_variant = plain;
    MAKE_GPU_ENGINE(a, builtin(preset), 2, with);
    MAKE_GPU_ENGINE(b, builtin(preset), 2, without);
    for (const auto& prompts : std::vector<std::vector<std::vector<int32_t>>>{
             {kPrompt, {3, 4, 5}, {9}},
             {{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}, {1}, kPrompt}}) {
      auto ga = generate(*a.engine, prompts, 20);
      auto gb = generate(*b.engine, prompts, 20);
      ASSERT_TRUE(ga.is_ok()) << ga.status().to_string();
      ASSERT_TRUE(gb.is_ok()) << gb.status().to_string();
      EXPECT_EQ(ga->tokens, gb->tokens);
      std::vector<float> la, lb;
      ASSERT_TRUE(a.engine->last_logits(&la).is_ok());
      ASSERT_TRUE(b.engine->last_logits(&lb).is_ok());
      EXPECT_EQ(la, lb);
    }
    EXPECT_NE(a.engine->device_name().find("PDL early, L2 prefetch 2, RoPE in qkv"), std::string::npos)
        << a.engine->device_name();
    EXPECT_EQ(b.engine->device_name().find("RoPE"), std::string::npos) << b.engine->device_name();
    // The epilogue ran (no fallback to rope_kv's kernel): the profile has no rope_kv row.
    for (int with_rope = 0; with_rope < 2; ++with_rope) {
      auto prof = profile_decode_steps(with_rope ? *a.engine : *b.engine, {kPrompt, {3, 4, 5}, {9}}, 2, 1);
      ASSERT_TRUE(prof.is_ok()) << prof.status().to_string();
      std::string labels;
      for (const auto& r : prof->rows) labels += r.label + ";";
      EXPECT_EQ(labels.find("qkv.fused+rope:") != std::string::npos, with_rope == 1) << labels;
      EXPECT_EQ(labels.find("rope_kv") == std::string::npos, with_rope == 1) << labels;
    }
  }
}

// Tuned attention (flash, split-KV decode, cuDNN SDPA where it applies, chosen by measurement)
// on both caches, against Default's math path, on a ragged batch. Teacher-forced: both engines
// are fed Default's greedy tokens, and every step's logits must agree to bf16 rounding (a free
// run would compare two different sequences after the first near-tie of a random model). And
// Default's ragged batch equals its prompts run one by one.
TEST(LlmCuda, TunedAttentionMatchesDefaultOnBothCaches) {
  const std::vector<std::vector<int32_t>> prompts = {
      kPrompt, {3, 4, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}};
  constexpr int kSteps = 12;
  MAKE_GPU_ENGINE(ref, builtin("tiny"), 2, opts(DType::kBF16, 3));
  auto want = generate(*ref.engine, prompts, kSteps);
  ASSERT_TRUE(want.is_ok()) << want.status().to_string();
  for (size_t b = 0; b < prompts.size(); ++b) {
    MAKE_GPU_ENGINE(one, builtin("tiny"), 2, opts(DType::kBF16, 1));
    auto g = generate(*one.engine, {prompts[b]}, kSteps);
    ASSERT_TRUE(g.is_ok());
    EXPECT_EQ(g->tokens[0], want->tokens[b]) << "sequence " << b;
  }
  for (int64_t page : {int64_t(0), int64_t(16), int64_t(64)}) {
    SCOPED_TRACE(page ? "paged " + std::to_string(page) : std::string("static"));
    GpuRun t;
    testing::ScratchDir dir("cuda_tuned");
    const std::string file = dir.path() + "/results.csv";
    Config cfg = Config::defaults_only();
    ASSERT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
    ASSERT_TRUE(cfg.set(Setting::kTuning, true).is_ok());
    ASSERT_TRUE(cfg.set(Setting::kFilename, file.c_str()).is_ok());
    ASSERT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, int64_t(5)).is_ok());
    ASSERT_TRUE(cfg.set(Setting::kMaxWarmupDurationMs, int64_t(1)).is_ok());
    t.ctx = std::make_unique<Context>(Device::cuda(0), std::move(cfg));
    auto made = make_cuda_engine(builtin("tiny"), 7, 2,
                                 page ? paged(opts(DType::kBF16, 3), page) : opts(DType::kBF16, 3), *t.ctx);
    ASSERT_TRUE(made.is_ok()) << made.status().to_string();
    Engine& tuned = **made;
    std::vector<int32_t> n_ref, n_tuned;
    ASSERT_TRUE(ref.engine->prefill(prompts, &n_ref).is_ok());
    ASSERT_TRUE(tuned.prefill(prompts, &n_tuned).is_ok());
    int agree = 0, total = 0;
    for (int step = 0; step < kSteps; ++step) {
      std::vector<float> lr, lt;
      ASSERT_TRUE(ref.engine->last_logits(&lr).is_ok());
      ASSERT_TRUE(tuned.last_logits(&lt).is_ok());
      EXPECT_LT(relative_error(lt, lr), 3e-2) << "step " << step;
      for (size_t b = 0; b < prompts.size(); ++b) agree += n_ref[b] == n_tuned[b], ++total;
      if (step + 1 == kSteps) break;
      const std::vector<int32_t> feed = n_ref;  // both follow Default's tokens
      ASSERT_TRUE(ref.engine->decode(feed, &n_ref).is_ok());
      ASSERT_TRUE(tuned.decode(feed, &n_tuned).is_ok());
    }
    EXPECT_GE(agree, total - 2) << "greedy choices differ beyond near-ties";
    EXPECT_EQ(tuned.linear().attention_problems().size(), 2u);
    // Decode attention was tuned before the step was captured: the graph is on, and its choice
    // is reported (tuned at full length, tune_decode_attention).
    EXPECT_NE(tuned.device_name().find("CUDA graph decode"), std::string::npos) << tuned.device_name();
    EXPECT_NE(tuned.kernel_choices().find("decode attention b3_q1_k96_"), std::string::npos) << tuned.kernel_choices();
  }
}

// Issue 13's device-side decode loop (step N+1 queued before token N is read; ids, positions
// and lengths advanced on the device) gives the host loop's tokens exactly: static and paged
// caches (pages of 4: a new page every 4 steps, allocated ahead of the queued step), graph and
// eager, fused and unfused, one sequence and a ragged batch, on the same engine one after the
// other (each loop's first step finds the other's state), two generations each.
TEST(LlmCuda, DeviceDecodeLoopEqualsHostLoop) {
  const std::vector<std::vector<std::vector<int32_t>>> batches = {
      {kPrompt}, {kPrompt, {3, 4, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}}};
  for (int64_t page : {int64_t(0), int64_t(4)}) {
    for (bool graph : {true, false}) {
      for (auto fusion : {kUnfused, kFused}) {
        SCOPED_TRACE(std::string(page ? "paged" : "static") + (graph ? ", graph" : ", eager") +
                     (fusion == kFused ? ", fused" : ", unfused"));
        const EngineOptions o = opts(DType::kBF16, 3, 8, graph, fusion);
        MAKE_GPU_ENGINE(gpu, builtin("tiny-gemma"), 2, page ? paged(o, page) : o);
        ASSERT_TRUE(gpu.engine->decode_ahead_supported());
        for (const auto& prompts : batches) {
          for (int round = 0; round < 2; ++round) {
            auto host = generate(*gpu.engine, prompts, testing::loop_options(20, DecodeLoop::kHost));
            auto device = generate(*gpu.engine, prompts, testing::loop_options(20, DecodeLoop::kDevice));
            ASSERT_TRUE(host.is_ok()) << host.status().to_string();
            ASSERT_TRUE(device.is_ok()) << device.status().to_string();
            EXPECT_EQ(device->tokens, host->tokens) << "batch " << prompts.size() << ", round " << round;
            ASSERT_EQ(device->step_s.size(), 19u);
            // Every step ran once: the lengths are the host loop's.
            std::vector<int64_t> want;
            for (const auto& p : prompts) want.push_back(int64_t(p.size()) + 19);
            EXPECT_EQ(gpu.engine->sequence_lengths(), want);
          }
        }
        if (graph) {
          EXPECT_NE(gpu.engine->device_name().find("CUDA graph decode"), std::string::npos)
              << gpu.engine->device_name();
        }
      }
    }
  }
}

// With TunableOp on and the step variants timed (the benchmark's path), the device loop first:
// its first step chooses the variant on the step alone (replays of the step + advance would move
// the inputs), then the host loop reuses that graph; both give the same tokens. Two steps ahead
// and a stop token seen one step late give the host loop's tokens too.
TEST(LlmCuda, DeviceDecodeLoopWithTunedStepVariants) {
  for (int64_t page : {int64_t(0), int64_t(16)}) {
    SCOPED_TRACE(page ? "paged" : "static");
    GpuRun t;
    testing::ScratchDir dir("cuda_loop");
    Config cfg = Config::defaults_only();
    ASSERT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
    ASSERT_TRUE(cfg.set(Setting::kTuning, true).is_ok());
    ASSERT_TRUE(cfg.set(Setting::kFilename, (dir.path() + "/results.csv").c_str()).is_ok());
    ASSERT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, int64_t(5)).is_ok());
    ASSERT_TRUE(cfg.set(Setting::kMaxWarmupDurationMs, int64_t(1)).is_ok());
    t.ctx = std::make_unique<Context>(Device::cuda(0), std::move(cfg));
    const EngineOptions o = opts(DType::kBF16, 2, 8, true, EngineOptions::Fusion::kAuto);
    auto made = make_cuda_engine(builtin("tiny-gemma"), 7, 2, page ? paged(o, page) : o, *t.ctx);
    if (!made.is_ok() && made.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << made.status().message();
    ASSERT_TRUE(made.is_ok()) << made.status().to_string();
    Engine& e = **made;
    const std::vector<std::vector<int32_t>> prompts = {kPrompt, {3, 4, 5}};
    auto device = generate(e, prompts, testing::loop_options(24, DecodeLoop::kDevice));
    auto host = generate(e, prompts, testing::loop_options(24, DecodeLoop::kHost));
    auto two = generate(e, prompts, testing::loop_options(24, DecodeLoop::kDevice, -1, 2));
    ASSERT_TRUE(device.is_ok()) << device.status().to_string();
    ASSERT_TRUE(host.is_ok()) << host.status().to_string();
    ASSERT_TRUE(two.is_ok()) << two.status().to_string();
    EXPECT_EQ(device->tokens, host->tokens);
    EXPECT_EQ(two->tokens, host->tokens);
    EXPECT_NE(e.device_name().find("CUDA graph decode"), std::string::npos) << e.device_name();
    // A stop token: sequence 0's 6th token; sequence 1 goes on to its own stop or the end.
    const int32_t stop = host->tokens[0][5];
    auto hs = generate(e, prompts, testing::loop_options(24, DecodeLoop::kHost, stop));
    auto ds = generate(e, prompts, testing::loop_options(24, DecodeLoop::kDevice, stop));
    ASSERT_TRUE(hs.is_ok() && ds.is_ok());
    EXPECT_EQ(ds->tokens, hs->tokens);
    EXPECT_LE(hs->tokens[0].size(), 6u);
  }
}

// Sets TUNABLEOP_LLM_PREFILL_GATE_CUDNN for one scope.
class PrefillGateCudnn {
 public:
  explicit PrefillGateCudnn(const char* mode) { setenv("TUNABLEOP_LLM_PREFILL_GATE_CUDNN", mode, 1); }
  ~PrefillGateCudnn() { unsetenv("TUNABLEOP_LLM_PREFILL_GATE_CUDNN"); }
};

// Prefill's gate_up through cuDNN's fused gate GEMM (bf16) against the GEMM + gated kernel:
// prefill logits close (the gate is no longer rounded to bf16 before the activation), and the
// Hugging Face fixtures' greedy tokens in bf16 the same both ways. Where cuDNN cannot run it the
// engine falls back (the choice says so) and the comparison is trivially equal.
TEST(LlmCuda, PrefillGateThroughCudnnMatchesTheGatedKernel) {
  std::vector<std::pair<std::string, ModelSpec>> models = {{"tiny", builtin("tiny")},
                                                           {"tiny-gemma", builtin("tiny-gemma")}};
  const char* src = std::getenv("TUNABLEOP_SOURCE_DIR");
  const std::string root = std::string(src ? src : ".") + "/tests/fixtures/llm";
  for (const std::string name : {"llama_gqa", "gemma_mqa", "llama_tied_sharded"}) {
    if (!std::filesystem::exists(root + "/" + name + "/reference.json")) continue;
    ModelSpec spec;
    spec.dir = root + "/" + name;
    models.emplace_back(name, spec);
  }
  for (const auto& [name, spec] : models) {
    SCOPED_TRACE(name);
    std::vector<std::vector<int32_t>> prompts = {kPrompt, {3, 4, 5}};
    if (!spec.builtin) {  // the fixture's prompt (its vocabulary is small)
      std::ifstream in(spec.dir + "/reference.json");
      prompts = {nlohmann::json::parse(in)["prompt_ids"].get<std::vector<int32_t>>()};
    }
    std::vector<float> logits[2];
    std::vector<std::vector<int32_t>> tokens[2];
    std::string choices;
    for (int cudnn = 0; cudnn < 2; ++cudnn) {
      PrefillGateCudnn mode(cudnn ? "on" : "off");
      MAKE_GPU_ENGINE(gpu, spec, spec.builtin ? 2 : 0, opts(DType::kBF16, 2));
      std::vector<int32_t> next;
      ASSERT_TRUE(gpu.engine->prefill(prompts, &next).is_ok());
      ASSERT_TRUE(gpu.engine->last_logits(&logits[cudnn]).is_ok());
      auto g = generate(*gpu.engine, prompts, 8);
      ASSERT_TRUE(g.is_ok()) << g.status().to_string();
      tokens[cudnn] = g->tokens;
      if (cudnn) choices = gpu.engine->kernel_choices();
    }
    EXPECT_NE(choices.find("prefill gate gate_up"), std::string::npos) << choices;
    EXPECT_LT(relative_error(logits[1], logits[0]), 2e-2) << choices;
    if (!spec.builtin) {
      EXPECT_EQ(tokens[1], tokens[0]) << choices;
    }
  }
}

// With TunableOp on and tuning, the default (auto) times prefill's gate_up (gemm+gated, the up
// GEMM, the up GEMM + each of cuDNN's gate configurations), keeps the fastest and stores the
// choice in the results file (PrefillGateTunableOp_BFloat16); an engine on a fresh context with
// tuning off reads it back without timing. Prefill logits close to the gate off (bf16). Skips
// where cuDNN cannot run the graph (the choice says why).
TEST(LlmCuda, AutoGateChoiceIsTimedAndReadBackFromTheResultsFile) {
  const auto dir = std::filesystem::temp_directory_path() / "tunableop_llm_auto_gate";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<std::vector<int32_t>> prompts = {kPrompt, {3, 4, 5}};
  std::vector<float> want;
  {
    PrefillGateCudnn off("off");
    MAKE_GPU_ENGINE(plain, builtin("tiny-gemma"), 2, opts(DType::kBF16, 2));
    std::vector<int32_t> next;
    ASSERT_TRUE(plain.engine->prefill(prompts, &next).is_ok());
    ASSERT_TRUE(plain.engine->last_logits(&want).is_ok());
  }
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "timed" : "read back");
    GpuRun tuned;
    tuned.ctx = std::make_unique<Context>(Device::cuda(0), Config::defaults_only());
    ASSERT_TRUE(tuned.ctx->config().set(Setting::kEnabled, true).is_ok());
    ASSERT_TRUE(tuned.ctx->config().set(Setting::kTuning, pass == 0).is_ok());
    ASSERT_TRUE(tuned.ctx->config().set(Setting::kFilename, (dir / "results_%d.csv").string()).is_ok());
    auto e = make_cuda_engine(builtin("tiny-gemma"), 7, 2, opts(DType::kBF16, 2), *tuned.ctx);
    if (!e.is_ok() && e.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << e.status().message();
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    tuned.engine = std::move(e.value());
    std::vector<int32_t> next;
    ASSERT_TRUE(tuned.engine->prefill(prompts, &next).is_ok());
    std::vector<float> logits;
    ASSERT_TRUE(tuned.engine->last_logits(&logits).is_ok());
    const std::string choices = tuned.engine->kernel_choices();
    ASSERT_NE(choices.find("prefill gate gate_up"), std::string::npos) << choices;
    if (choices.find("(cuDNN: ") != std::string::npos) GTEST_SKIP() << choices;
    EXPECT_NE(choices.find(pass == 0 ? "(timed; gemm+gated " : "(results file)"), std::string::npos) << choices;
    EXPECT_LT(relative_error(logits, want), 2e-2) << choices;
    std::ifstream results(dir / "results_0.csv");
    std::stringstream text;
    text << results.rdbuf();
    EXPECT_NE(text.str().find("PrefillGateTunableOp_BFloat16,gelu_tanh_n"), std::string::npos) << text.str();
    std::printf("%s", choices.c_str());
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tunableop::llm
