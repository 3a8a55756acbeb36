// What the CUDA engine's tests share (cuda_engine_test.cc, cuda_engine_families_test.cc): a CUDA
// engine on a default-only context that skips the test without a GPU, the options they vary,
// and the comparisons they make.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "llm/engine.h"
#include "llm/generate.h"
#include "llm/random_model.h"
#include "tunableop/context.h"

namespace tunableop::llm::cuda_test {

inline ModelSpec builtin(const std::string& preset) {
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

inline EngineOptions opts(DType dtype, int64_t batch = 1, int64_t pad = 8, bool graph = true,
                          EngineOptions::Fusion fusion = EngineOptions::Fusion::kAuto) {
  EngineOptions o;
  o.max_batch = batch;
  o.max_seq = 96;
  o.pad_multiple = pad;
  o.dtype = dtype;
  o.cuda_graph = graph;
  o.fusion = fusion;
  return o;
}
constexpr auto kFused = EngineOptions::Fusion::kOn;
constexpr auto kUnfused = EngineOptions::Fusion::kOff;

inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

inline const std::vector<int32_t> kPrompt = {1, 5, 17, 300, 2, 9, 4000, 12, 8, 8, 1};  // 11 -> padded 16

// Two engines generate the same tokens and end with bit-identical logits.
inline void expect_same_generation(Engine& a, Engine& b, const std::vector<std::vector<int32_t>>& prompts,
                                   int64_t tokens) {
  auto ga = generate(a, prompts, tokens);
  auto gb = generate(b, prompts, tokens);
  ASSERT_TRUE(ga.is_ok()) << ga.status().to_string();
  ASSERT_TRUE(gb.is_ok()) << gb.status().to_string();
  EXPECT_EQ(ga->tokens, gb->tokens);
  std::vector<float> la, lb;
  ASSERT_TRUE(a.last_logits(&la).is_ok());
  ASSERT_TRUE(b.last_logits(&lb).is_ok());
  EXPECT_EQ(la, lb);
}

inline EngineOptions paged(EngineOptions o, int64_t page_size) {
  o.kv_cache.kind = KvCacheKind::kPaged;
  o.kv_cache.page_size = page_size;
  return o;
}

}  // namespace tunableop::llm::cuda_test
