// Shared helpers for the LLM tests: small model configs and scratch directories.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "llm/config.h"
#include "llm/engine.h"
#include "llm/generate.h"
#include "llm/random_model.h"
#include "tunableop/config.h"

namespace tunableop::llm::testing {

// A fresh directory under the test temp dir, removed when the object dies.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = ::testing::TempDir() + "/llm_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// sqrt(sum (got - want)^2 / sum want^2): logits of two engines compared as one vector.
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Greedy generation of n tokens through `loop` (host or device), with a stop token (-1: none)
// and the device loop's steps queued ahead.
inline GenerateOptions loop_options(int64_t n, DecodeLoop loop, int32_t stop = -1, int ahead = 1) {
  GenerateOptions o;
  o.max_new_tokens = n;
  o.loop = loop;
  o.stop_token = stop;
  o.ahead = ahead;
  return o;
}

// TunableOp on with results in `file`, tuning on or off, tiny budgets and no rotating buffers:
// for tests of the plumbing (what is tuned, stored and reused), not of the choice.
inline Config quick_tuning_config(const std::string& file, bool tuning = true) {
  Config cfg = Config::defaults_only();
  EXPECT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
  EXPECT_TRUE(cfg.set(Setting::kTuning, tuning).is_ok());
  EXPECT_TRUE(cfg.set(Setting::kFilename, file.c_str()).is_ok());
  EXPECT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, int64_t(1)).is_ok());
  EXPECT_TRUE(cfg.set(Setting::kMaxWarmupDurationMs, int64_t(1)).is_ok());
  EXPECT_TRUE(cfg.set(Setting::kMaxTuningIterations, int64_t(2)).is_ok());
  EXPECT_TRUE(cfg.set(Setting::kMaxWarmupIterations, int64_t(1)).is_ok());
  EXPECT_TRUE(cfg.set(Setting::kRotatingBufferSize, int64_t(0)).is_ok());
  return cfg;
}

inline EngineOptions options(int64_t max_batch, int64_t max_seq, int64_t pad_multiple) {
  EngineOptions o;
  o.max_batch = max_batch;
  o.max_seq = max_seq;
  o.pad_multiple = pad_multiple;
  return o;
}

// Llama with GQA (4 query heads over 2 kv heads), untied, odd intermediate size.
inline ModelConfig small_llama() {
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.intermediate_size = 45;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 1000.0;
  c.activation = Activation::kSilu;
  c.tie_word_embeddings = false;
  return c;
}

// Gemma with MQA, explicit head_dim != hidden / heads, tied embeddings.
inline ModelConfig small_gemma() {
  ModelConfig c;
  c.arch = Architecture::kGemma;
  c.vocab_size = 89;
  c.hidden_size = 24;
  c.intermediate_size = 37;
  c.num_layers = 2;
  c.num_heads = 3;
  c.num_kv_heads = 1;
  c.head_dim = 10;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.activation = Activation::kGeluTanh;
  c.tie_word_embeddings = true;
  return c;
}

// The current families, small, each with its features on (random weights from the shared
// generator), for the engine against the fp64 reference and the devices against each other.
// Llama 3: GQA, llama3 RoPE scaling over an original context of 16 (so that positions past it
// occur), untied.
inline ModelConfig small_llama3() {
  ModelConfig c = small_llama();
  c.rope_theta = 500000.0;
  c.rope.type = RopeType::kLlama3;
  c.rope.factor = 8, c.rope.low_freq_factor = 1, c.rope.high_freq_factor = 4;
  c.rope.original_max_position_embeddings = 16;
  return c;
}

// Mistral: a 4-key window on every layer (prompts of 5+ tokens overrun it).
inline ModelConfig small_mistral() {
  ModelConfig c = small_llama();
  c.arch = Architecture::kMistral;
  c.sliding_window = 4;
  c.layer_types.assign(size_t(c.num_layers), LayerType::kSliding);
  return c;
}

// Qwen2: q/k/v biases, tied embeddings, YaRN RoPE.
inline ModelConfig small_qwen2() {
  ModelConfig c = small_llama();
  c.arch = Architecture::kQwen2;
  c.qkv_bias = true;
  c.tie_word_embeddings = true;
  c.rope.type = RopeType::kYarn;
  c.rope.factor = 4, c.rope.original_max_position_embeddings = 16;
  return c;
}

// Qwen3: q/k head norms, explicit head_dim (12 x 4 heads over hidden 32), MQA.
inline ModelConfig small_qwen3() {
  ModelConfig c = small_llama();
  c.arch = Architecture::kQwen3;
  c.qk_norm = true;
  c.num_kv_heads = 1;
  c.head_dim = 12;
  return c;
}

// Gemma-2: GQA, post-norms, attention and final softcapping tight enough to bend the values, its
// own attention scale, and layers alternating between a 3-key window and full attention.
inline ModelConfig small_gemma2() {
  ModelConfig c = small_gemma();
  c.arch = Architecture::kGemma2;
  c.num_layers = 3;
  c.num_heads = 4, c.num_kv_heads = 2;  // GQA, as Gemma-2 has
  c.post_norms = true;
  c.attn_logit_softcapping = 1.5;
  c.final_logit_softcapping = 3.0;
  c.query_pre_attn_scalar = 6;
  c.sliding_window = 3;
  c.layer_types = {LayerType::kSliding, LayerType::kFull, LayerType::kSliding};
  return c;
}

}  // namespace tunableop::llm::testing
