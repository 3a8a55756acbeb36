// The fp8 engine's accuracy (docs/llm.md, "FP8"): an engine teacher-forced along a token sequence
// against a reference engine (fp32) on the same sequence, position by position. Shared by the
// CPU simulation of fp8 rounding (fp8_test.cc) and the CUDA fp8 engine's test
// (cuda_fp8_engine_test.cc), so both are held to the same metrics and thresholds.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llm/engine.h"

namespace tunableop::llm::testing {

// The Hugging Face fixtures (scripts/make_llm_fixtures.py) the fp8 tests run where committed.
inline const char* const kFp8Fixtures[] = {"llama_gqa",      "gemma_mqa",  "llama_tied_sharded", "llama3_rope",
                                           "mistral_window", "qwen2_bias", "qwen3_qknorm",       "gemma2_softcap"};

// The fixtures of kFp8Fixtures committed under `root` (tests/fixtures/llm of TUNABLEOP_SOURCE_DIR),
// each with its directory and reference.json.
struct Fp8Fixture {
  std::string name, dir;
  nlohmann::json ref;
};
inline std::string fp8_fixture_root() {
  const char* src = std::getenv("TUNABLEOP_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/fixtures/llm";
}
inline std::vector<Fp8Fixture> committed_fp8_fixtures() {
  std::vector<Fp8Fixture> out;
  for (const char* name : kFp8Fixtures) {
    const std::string dir = fp8_fixture_root() + "/" + name;
    if (!std::filesystem::exists(dir + "/reference.json")) continue;
    std::ifstream in(dir + "/reference.json");
    out.push_back({name, dir, nlohmann::json::parse(in)});
  }
  return out;
}

// The thresholds docs/llm.md states for --dtype fp8 against fp32, per position (see there for
// why): the logits' cosine similarity, the share of positions with the same argmax, and the
// change of the reference's top-1 log-probability relative to the logits' magnitude,
// |delta log p| <= kFp8MaxDeltaLogProb * max(1, max |reference logit|).
inline constexpr double kFp8MinCosine = 0.97;
inline constexpr double kFp8MinTop1 = 0.80;
inline constexpr double kFp8MaxDeltaLogProb = 0.15;
// A position whose reference logits put the engine's argmax within this fraction of
// max(1, max |reference logit|) of the reference's own top logit is a near-tie: fp8's few
// percent of logit error decides it either way, so it counts as agreeing (top1_strict does not).
inline constexpr double kFp8NearTie = 0.05;

// The logits after the prompt and after each forced token of `forced` (one sequence).
inline Status teacher_forced_logits(Engine& e, const std::vector<int32_t>& prompt, const std::vector<int32_t>& forced,
                                    std::vector<std::vector<float>>* out) {
  std::vector<int32_t> next;
  TUNABLEOP_RETURN_IF_ERROR(e.prefill({prompt}, &next));
  out->clear();
  out->emplace_back();
  TUNABLEOP_RETURN_IF_ERROR(e.last_logits(&out->back()));
  for (int32_t t : forced) {
    TUNABLEOP_RETURN_IF_ERROR(e.decode({t}, &next));
    out->emplace_back();
    TUNABLEOP_RETURN_IF_ERROR(e.last_logits(&out->back()));
  }
  return Status::ok();
}

// Extends `forced` with the reference's own greedy tokens until prompt + forced holds `length`
// tokens (the fixtures' transformers continuation first, then the fp32 engine's), and gives the
// reference's logits along the whole sequence (as teacher_forced_logits would: one pass).
inline Status extend_greedy(Engine& ref, const std::vector<int32_t>& prompt, std::vector<int32_t>* forced,
                            int64_t length, std::vector<std::vector<float>>* logits) {
  TUNABLEOP_RETURN_IF_ERROR(teacher_forced_logits(ref, prompt, *forced, logits));
  std::vector<int32_t> next;
  while (int64_t(prompt.size() + forced->size()) < length) {
    const std::vector<float>& last = logits->back();
    forced->push_back(int32_t(std::max_element(last.begin(), last.end()) - last.begin()));
    TUNABLEOP_RETURN_IF_ERROR(ref.decode({forced->back()}, &next));
    logits->emplace_back();
    TUNABLEOP_RETURN_IF_ERROR(ref.last_logits(&logits->back()));
  }
  return Status::ok();
}

struct Fp8Accuracy {
  double min_cosine = 1, top1 = 1;         // top1: the same argmax, or a near-tie (kFp8NearTie)
  double top1_strict = 1;                  // the same argmax
  double max_delta_log_prob = 0;           // nats
  double max_relative_delta_log_prob = 0;  // over max(1, max |reference logit|) of its position
  int64_t positions = 0;
  std::string to_string() const {
    return "positions " + std::to_string(positions) + ", min cosine " + std::to_string(min_cosine) + ", top-1 " +
           std::to_string(top1) + " (strict " + std::to_string(top1_strict) + "), max |delta log p| " +
           std::to_string(max_delta_log_prob) + " nats (" + std::to_string(max_relative_delta_log_prob) +
           " of the largest logit)";
  }
};

inline std::vector<double> log_softmax(const std::vector<float>& x) {
  const double m = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (float v : x) sum += std::exp(double(v) - m);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = double(x[i]) - m - std::log(sum);
  return out;
}

// got and want: one logits row per position. A non-finite logit fails every metric.
inline Fp8Accuracy compare_logits(const std::vector<std::vector<float>>& got,
                                  const std::vector<std::vector<float>>& want) {
  Fp8Accuracy a;
  int64_t same = 0, same_or_tie = 0;
  for (size_t p = 0; p < want.size() && p < got.size(); ++p) {
    const std::vector<float>&g = got[p], &w = want[p];
    double dot = 0, gg = 0, ww = 0;
    bool finite = g.size() == w.size();
    for (size_t i = 0; finite && i < w.size(); ++i) {
      finite = std::isfinite(g[i]);
      dot += double(g[i]) * w[i], gg += double(g[i]) * g[i], ww += double(w[i]) * w[i];
    }
    if (!finite) return {0, 0, 0, INFINITY, INFINITY, int64_t(want.size())};
    a.min_cosine = std::min(a.min_cosine, dot / std::sqrt(std::max(gg * ww, 1e-300)));
    const size_t top = size_t(std::max_element(w.begin(), w.end()) - w.begin());
    const size_t chosen = size_t(std::max_element(g.begin(), g.end()) - g.begin());
    const double delta = std::abs(log_softmax(g)[top] - log_softmax(w)[top]);
    double largest = 1;
    for (float v : w) largest = std::max(largest, std::abs(double(v)));
    same += chosen == top;
    same_or_tie += chosen == top || double(w[top]) - double(w[chosen]) <= kFp8NearTie * largest;
    a.max_delta_log_prob = std::max(a.max_delta_log_prob, delta);
    a.max_relative_delta_log_prob = std::max(a.max_relative_delta_log_prob, delta / largest);
    ++a.positions;
  }
  a.top1 = a.positions ? double(same_or_tie) / double(a.positions) : 0;
  a.top1_strict = a.positions ? double(same) / double(a.positions) : 0;
  if (got.size() != want.size()) a.top1 = a.top1_strict = 0;
  return a;
}

inline void expect_fp8_accuracy(const Fp8Accuracy& a, const std::string& what) {
  EXPECT_GE(a.min_cosine, kFp8MinCosine) << what << ": " << a.to_string();
  EXPECT_GE(a.top1, kFp8MinTop1) << what << ": " << a.to_string();
  EXPECT_LE(a.max_relative_delta_log_prob, kFp8MaxDeltaLogProb) << what << ": " << a.to_string();
}

}  // namespace tunableop::llm::testing
