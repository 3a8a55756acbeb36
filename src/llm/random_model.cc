#include "llm/random_model.h"

#include <cmath>
#include <optional>

#include "tunableop/status_boundary.h"

namespace tunableop::llm {

std::vector<std::string> preset_names() {
  return {"tiny",     "tiny-gemma", "tiny-gqa8",  "llama-2-7b", "llama-2-13b", "llama-2-70b",     "llama-3-70b",
          "gemma-2b", "llama-3-8b", "mistral-7b", "qwen2.5-7b", "gemma-2-9b",  "gemma-2-9b-nocap"};
}

namespace {

// The shapes shared by a preset's config: sizes, heads and RoPE base.
ModelConfig shape(Architecture arch, int64_t vocab, int64_t hidden, int64_t inter, int64_t layers, int64_t heads,
                  int64_t kv_heads, int64_t head_dim, int64_t max_pos, double eps, double theta) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = vocab, c.hidden_size = hidden, c.intermediate_size = inter, c.num_layers = layers;
  c.num_heads = heads, c.num_kv_heads = kv_heads, c.head_dim = head_dim;
  c.max_position_embeddings = max_pos, c.rms_norm_eps = eps, c.rope_theta = theta;
  c.activation = Activation::kSilu;
  return c;
}

// The current families' configs (their Hugging Face config.json files), or nothing.
std::optional<ModelConfig> family_preset(const std::string& name) {
  // The tensor-parallel benchmark shapes (issue 30): Llama-2-13B (MHA), Llama-2-70B and
  // Llama-3-70B (GQA: 64 query heads over 8 kv heads, so TP=8 gives each rank one kv head).
  if (name == "llama-2-13b")  // meta-llama/Llama-2-13b-hf
    return shape(Architecture::kLlama, 32000, 5120, 13824, 40, 40, 40, 128, 4096, 1e-5, 10000.0);
  if (name == "llama-2-70b")  // meta-llama/Llama-2-70b-hf
    return shape(Architecture::kLlama, 32000, 8192, 28672, 80, 64, 8, 128, 4096, 1e-5, 10000.0);
  if (name == "llama-3-70b")  // meta-llama/Meta-Llama-3-70B: 128k vocabulary, RoPE base 500000, no scaling
    return shape(Architecture::kLlama, 128256, 8192, 28672, 80, 64, 8, 128, 8192, 1e-5, 500000.0);
  // The 70B's head layout in miniature, for tests on 8 CPU ranks: 16 query heads over 8 kv
  // heads split 8 ways as the 70B's 64 over 8 do (each rank whole groups and one kv head).
  if (name == "tiny-gqa8") return shape(Architecture::kLlama, 1024, 256, 512, 2, 16, 8, 16, 512, 1e-5, 10000.0);
  if (name == "llama-3-8b") {  // meta-llama/Llama-3.1-8B: GQA 4, 128k vocabulary, llama3 RoPE scaling
    ModelConfig c = shape(Architecture::kLlama, 128256, 4096, 14336, 32, 32, 8, 128, 131072, 1e-5, 500000.0);
    c.rope.type = RopeType::kLlama3;
    c.rope.factor = 8, c.rope.low_freq_factor = 1, c.rope.high_freq_factor = 4;
    c.rope.original_max_position_embeddings = 8192;
    return c;
  }
  if (name == "mistral-7b") {  // mistralai/Mistral-7B-v0.1: GQA 4, a 4096-key window on every layer
    ModelConfig c = shape(Architecture::kMistral, 32000, 4096, 14336, 32, 32, 8, 128, 32768, 1e-5, 10000.0);
    c.sliding_window = 4096;
    c.layer_types.assign(size_t(c.num_layers), LayerType::kSliding);
    return c;
  }
  if (name == "qwen2.5-7b") {  // Qwen/Qwen2.5-7B: GQA 7, q/k/v biases, 152k vocabulary, untied
    ModelConfig c = shape(Architecture::kQwen2, 152064, 3584, 18944, 28, 28, 4, 128, 131072, 1e-6, 1000000.0);
    c.qkv_bias = true;
    return c;
  }
  if (name == "gemma-2-9b" || name == "gemma-2-9b-nocap") {  // google/gemma-2-9b
    ModelConfig c = shape(Architecture::kGemma2, 256000, 3584, 14336, 42, 16, 8, 256, 8192, 1e-6, 10000.0);
    c.activation = Activation::kGeluTanh;
    c.tie_word_embeddings = true;
    c.post_norms = true;
    c.query_pre_attn_scalar = 256;
    c.sliding_window = 4096;
    for (int64_t i = 0; i < c.num_layers; ++i)
      c.layer_types.push_back(i % 2 == 0 ? LayerType::kSliding : LayerType::kFull);
    if (name == "gemma-2-9b") c.attn_logit_softcapping = 50, c.final_logit_softcapping = 30;
    return c;
  }
  return std::nullopt;
}

}  // namespace

StatusOr<ModelConfig> preset_config(const std::string& name) {
  ModelConfig c;
  if (name == "tiny") {
    // Small enough to generate and run in well under a second on 2 cores, big enough that the
    // GEMMs dominate: ~15M parameters, GQA (8 query heads over 2 kv heads), untied lm_head.
    c.arch = Architecture::kLlama;
    c.vocab_size = 8192;
    c.hidden_size = 512;
    c.intermediate_size = 1376;
    c.num_layers = 4;
    c.num_heads = 8;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    c.max_position_embeddings = 2048;
    c.rms_norm_eps = 1e-5;
    c.activation = Activation::kSilu;
    c.tie_word_embeddings = false;
  } else if (name == "tiny-gemma") {
    c.arch = Architecture::kGemma;
    c.vocab_size = 8192;
    c.hidden_size = 512;
    c.intermediate_size = 2048;
    c.num_layers = 4;
    c.num_heads = 4;
    c.num_kv_heads = 1;
    c.head_dim = 128;
    c.max_position_embeddings = 2048;
    c.activation = Activation::kGeluTanh;
    c.tie_word_embeddings = true;
  } else if (name == "llama-2-7b") {  // meta-llama/Llama-2-7b-hf config.json
    c.arch = Architecture::kLlama;
    c.vocab_size = 32000;
    c.hidden_size = 4096;
    c.intermediate_size = 11008;
    c.num_layers = 32;
    c.num_heads = 32;
    c.num_kv_heads = 32;
    c.head_dim = 128;
    c.max_position_embeddings = 4096;
    c.rms_norm_eps = 1e-5;
    c.activation = Activation::kSilu;
    c.tie_word_embeddings = false;
  } else if (name == "gemma-2b") {  // google/gemma-2b config.json
    c.arch = Architecture::kGemma;
    c.vocab_size = 256000;
    c.hidden_size = 2048;
    c.intermediate_size = 16384;
    c.num_layers = 18;
    c.num_heads = 8;
    c.num_kv_heads = 1;
    c.head_dim = 256;
    c.max_position_embeddings = 8192;
    c.rms_norm_eps = 1e-6;
    c.activation = Activation::kGeluTanh;
    c.tie_word_embeddings = true;
  } else if (auto f = family_preset(name)) {
    c = *f;
  } else {
    std::string names;
    for (const std::string& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    return Status::invalid_argument("unknown built-in model \"" + name + "\" (known: " + names + ")");
  }
  return c;
}

RandomInit random_init(const ModelConfig& c, RandomTensor t) {
  const float sqrt3 = std::sqrt(3.0f);  // uniform[-a, a] has std a / sqrt(3)
  auto fan_in = [&](int64_t n) { return RandomInit{sqrt3 / std::sqrt(float(n)), 0.f}; };
  const float norm_offset = c.norm_adds_one() ? 0.f : 1.f;
  switch (t) {
    case RandomTensor::kEmbed:
    case RandomTensor::kLmHead:
    case RandomTensor::kWqkv:
    case RandomTensor::kGateUp: return fan_in(c.hidden_size);
    case RandomTensor::kWo: return fan_in(c.q_dim());
    case RandomTensor::kDown: return fan_in(c.intermediate_size);
    case RandomTensor::kFinalNorm:
    case RandomTensor::kAttnNorm:
    case RandomTensor::kMlpNorm:
    case RandomTensor::kPostAttnNorm:
    case RandomTensor::kPostMlpNorm: return {0.1f, norm_offset};
    case RandomTensor::kQNorm:
    case RandomTensor::kKNorm: return {0.1f, 1.f};  // Qwen3's head norms multiply by w
    case RandomTensor::kQkvBias: return {0.1f, 0.f};
  }
  return {};
}

namespace {

void fill(std::vector<float>& v, const ModelConfig& c, uint64_t seed, RandomTensor t, int64_t layer) {
  const RandomInit init = random_init(c, t);
  const uint64_t stream = random_stream(t, layer);
  const int64_t n = int64_t(v.size());
  float* p = v.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = init.offset + init.scale * random_uniform(seed, stream, uint64_t(i));
}

}  // namespace

ModelWeights make_random_weights(const ModelConfig& c, uint64_t seed, const std::string& name) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  ModelWeights w;
  w.config = c;
  w.name = name;
  w.embed.resize(size_t(c.vocab_size * H));
  fill(w.embed, c, seed, RandomTensor::kEmbed, -1);
  w.final_norm.resize(size_t(H));
  fill(w.final_norm, c, seed, RandomTensor::kFinalNorm, -1);
  if (!c.tie_word_embeddings) {
    w.lm_head.resize(size_t(c.vocab_size * H));
    fill(w.lm_head, c, seed, RandomTensor::kLmHead, -1);
  }
  w.layers.resize(size_t(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[size_t(i)];
    l.attn_norm.resize(size_t(H));
    l.wqkv.resize(size_t(c.qkv_dim() * H));
    l.wo.resize(size_t(H * c.q_dim()));
    l.mlp_norm.resize(size_t(H));
    l.w_gate_up.resize(size_t(2 * I * H));
    l.w_down.resize(size_t(H * I));
    fill(l.attn_norm, c, seed, RandomTensor::kAttnNorm, i);
    fill(l.wqkv, c, seed, RandomTensor::kWqkv, i);
    fill(l.wo, c, seed, RandomTensor::kWo, i);
    fill(l.mlp_norm, c, seed, RandomTensor::kMlpNorm, i);
    fill(l.w_gate_up, c, seed, RandomTensor::kGateUp, i);
    fill(l.w_down, c, seed, RandomTensor::kDown, i);
    size_family_weights(c, l);  // the family's tensors (empty when absent: fill does nothing)
    fill(l.qkv_bias, c, seed, RandomTensor::kQkvBias, i);
    fill(l.q_norm, c, seed, RandomTensor::kQNorm, i);
    fill(l.k_norm, c, seed, RandomTensor::kKNorm, i);
    fill(l.post_attn_norm, c, seed, RandomTensor::kPostAttnNorm, i);
    fill(l.post_mlp_norm, c, seed, RandomTensor::kPostMlpNorm, i);
  }
  return w;
}

StatusOr<ModelSpec> parse_model_spec(const std::string& s) {
  ModelSpec spec;
  if (s.rfind("builtin:", 0) == 0 || s == "builtin") {
    spec.builtin = true;
    spec.preset = s == "builtin" ? "tiny" : s.substr(8);
    auto c = preset_config(spec.preset);
    if (!c.is_ok()) return c.status();
  } else if (s.empty()) {
    return Status::invalid_argument("empty model name");
  } else {
    spec.dir = s;
  }
  return spec;
}

StatusOr<ModelConfig> spec_config(const ModelSpec& spec, int64_t layers) {
  auto c = spec.builtin ? preset_config(spec.preset) : load_model_config(spec.dir);
  if (!c.is_ok()) return c.status();
  if (layers < 0) return Status::invalid_argument("--layers must be >= 1 (got " + std::to_string(layers) + ")");
  if (layers > 0) {
    if (!spec.builtin) return Status::invalid_argument("--layers applies to built-in models only");
    set_layer_count(*c, layers);
    TUNABLEOP_RETURN_IF_ERROR(c->validate("builtin:" + spec.preset + " with --layers " + std::to_string(layers)));
  }
  return c;
}

StatusOr<ModelWeights> load_or_generate(const ModelSpec& spec, uint64_t seed, int64_t layers) {
  if (!spec.builtin) {
    if (layers > 0) return Status::invalid_argument("--layers applies to built-in models only");
    return load_model(spec.dir);
  }
  auto c = spec_config(spec, layers);
  if (!c.is_ok()) return c.status();
  const std::string name = "builtin:" + spec.preset;
  TUNABLEOP_RETURN_IF_ERROR(check_weights_fit(*c, name));  // before allocating them
  return status_boundary([&] { return "generating " + name; },
                         [&]() -> StatusOr<ModelWeights> { return make_random_weights(*c, seed, name); });
}

}  // namespace tunableop::llm
