// The CPU engine against the fp64 reference forward pass (naive_model.h), step by step, on each
// way attention runs; shared by the engine's tests and the families' (families_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "llm/engine.h"
#include "llm_test_util.h"
#include "naive_model.h"
#include "tunableop/context.h"

namespace tunableop::llm::testing {

// Tuning off, no results file: every GEMM runs Default through tunableop::linear.
inline std::unique_ptr<Context> default_only_context() {
  return std::make_unique<Context>(Device::cpu(), Config::defaults_only());
}

inline EngineOptions paged(EngineOptions o, int64_t page_size, int64_t pages = 0) {
  o.kv_cache.kind = KvCacheKind::kPaged;
  o.kv_cache.page_size = page_size;
  o.kv_cache.pages = pages;
  return o;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// Greedy generation on the engine; at every step the engine's logits and token must agree with
// the fp64 reference run over the whole sequence so far.
// How attention runs: the attention op (the engine's path) on a static or paged cache; without
// an attention function, prefill attention through tunableop::gemm or the plain kernel.
enum class AttentionPath { kOp, kOpPaged, kGemms, kKernel };

inline void check_against_reference(const ModelConfig& c, const std::vector<int32_t>& prompt, int steps, int64_t pad,
                                    AttentionPath path = AttentionPath::kOp) {
  auto ctx = default_only_context();
  auto weights = std::make_shared<const ModelWeights>(make_random_weights(c, 42));
  EngineOptions o = options(1, 48, pad);
  if (path == AttentionPath::kOpPaged) o = paged(o, 4);  // several pages per sequence
  const bool op = path == AttentionPath::kOp || path == AttentionPath::kOpPaged;
  auto engine = make_cpu_engine(weights, o, tunableop_linear(*ctx),
                                path == AttentionPath::kKernel ? LinearOp::GemmFn{} : tunableop_gemm(*ctx),
                                op ? tunableop_attention(*ctx) : LinearOp::AttentionFn{});
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  Engine& e = **engine;
  std::vector<int32_t> seq = prompt, next;
  ASSERT_TRUE(e.prefill({prompt}, &next).is_ok());
  for (int s = 0; s < steps; ++s) {
    std::vector<double> ref_all = naive_logits(*weights, seq);
    std::vector<double> ref(ref_all.end() - c.vocab_size, ref_all.end());
    std::vector<float> got;
    ASSERT_TRUE(e.last_logits(&got).is_ok());
    ASSERT_EQ(got.size(), size_t(c.vocab_size));
    const double tol = 1e-4 * std::max(1.0, max_abs(ref));
    int32_t ref_best = int32_t(std::max_element(ref.begin(), ref.end()) - ref.begin());
    for (int64_t i = 0; i < c.vocab_size; ++i) {
      ASSERT_NEAR(got[size_t(i)], ref[size_t(i)], tol) << "step " << s << " logit " << i;
    }
    ASSERT_EQ(next[0], ref_best) << "step " << s;
    seq.push_back(next[0]);
    if (s + 1 < steps) {
      ASSERT_TRUE(e.decode({next[0]}, &next).is_ok());
    }
  }
}

}  // namespace tunableop::llm::testing
