// Random-weight models generated in-process: a small built-in one (so `tunableop llm` runs
// offline in seconds) and the real Llama-2-7B and Gemma-2B shapes for benchmarks. Every weight
// is a pure function of (seed, tensor, index), so the CPU and a GPU can generate the same model
// independently and in parallel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llm/config.h"
#include "llm/weights.h"

#if defined(__CUDACC__)
#define TUNABLEOP_LLM_HD __host__ __device__
#else
#define TUNABLEOP_LLM_HD
#endif

namespace tunableop::llm {

// "tiny" (the default: Llama-style, GQA), "tiny-gemma" (MQA), "llama-2-7b", "gemma-2b".
std::vector<std::string> preset_names();
StatusOr<ModelConfig> preset_config(const std::string& name);

// Which tensor a random stream belongs to (fused layouts, as in weights.h).
enum class RandomTensor : uint64_t { kEmbed = 1, kFinalNorm, kLmHead, kAttnNorm, kWqkv, kWo, kMlpNorm, kGateUp, kDown };

TUNABLEOP_LLM_HD inline uint64_t random_stream(RandomTensor t, int64_t layer) {
  return uint64_t(t) + 16u * uint64_t(layer + 1);
}

// Uniform in [-1, 1): a splitmix64 finaliser of (seed, stream, index), top 24 bits.
TUNABLEOP_LLM_HD inline float random_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull + index;
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

// Weight = offset + scale * random_uniform. Matrices get std 1/sqrt(fan_in) so activations stay
// O(1) at any width; norm weights sit near their neutral value (1 for Llama, 0 for Gemma's 1 + w).
struct RandomInit {
  float scale = 0;
  float offset = 0;
};
RandomInit random_init(const ModelConfig& c, RandomTensor t);

// Fills every weight of `c` on the host (OpenMP-parallel).
ModelWeights make_random_weights(const ModelConfig& c, uint64_t seed, const std::string& name = "random");

// A model named on the command line: "builtin:<preset>" (random weights from `seed`;
// `layers` > 0 overrides the preset's layer count, to fit a real-shaped model on a small
// machine) or a Hugging Face model directory.
struct ModelSpec {
  bool builtin = false;
  std::string preset;  // builtin only
  std::string dir;     // directory only
};
StatusOr<ModelSpec> parse_model_spec(const std::string& s);
StatusOr<ModelConfig> spec_config(const ModelSpec& spec, int64_t layers);
StatusOr<ModelWeights> load_or_generate(const ModelSpec& spec, uint64_t seed, int64_t layers);

}  // namespace tunableop::llm
