// Random-weight models generated in-process: a small built-in one (so `tunableop llm` runs
// offline in seconds) and the real Llama-2-7B and Gemma-2B shapes for benchmarks. Every weight
// is a pure function of (seed, tensor, index), so the CPU and a GPU can generate the same model
// independently and in parallel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llm/config.h"
#include "llm/random_hash.h"
#include "llm/weights.h"

namespace tunableop::llm {

// "tiny" (the default: Llama-style, GQA), "tiny-gemma" (MQA), "tiny-gqa8" (heads that split 8
// ways, for tensor-parallel tests), "llama-2-7b", "gemma-2b", the tensor-parallel shapes
// "llama-2-13b", "llama-2-70b" and "llama-3-70b", and the current families' benchmark shapes:
// "llama-3-8b", "mistral-7b", "qwen2.5-7b", "gemma-2-9b" (and "gemma-2-9b-nocap": the same
// without softcapping, to measure what it costs).
std::vector<std::string> preset_names();
StatusOr<ModelConfig> preset_config(const std::string& name);

// Which tensor a random stream belongs to (fused layouts, as in weights.h).
// Values stay below 16 (random_stream's stride); new tensors go at the end, so the existing
// ones keep their streams.
enum class RandomTensor : uint64_t {
  kEmbed = 1,
  kFinalNorm,
  kLmHead,
  kAttnNorm,
  kWqkv,
  kWo,
  kMlpNorm,
  kGateUp,
  kDown,
  kQkvBias,
  kQNorm,
  kKNorm,
  kPostAttnNorm,
  kPostMlpNorm,
};

inline uint64_t random_stream(RandomTensor t, int64_t layer) { return uint64_t(t) + 16u * uint64_t(layer + 1); }

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
