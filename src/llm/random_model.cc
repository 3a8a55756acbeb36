#include "llm/random_model.h"

#include <cmath>

#include "tunableop/status_boundary.h"

namespace tunableop::llm {

std::vector<std::string> preset_names() { return {"tiny", "tiny-gemma", "llama-2-7b", "gemma-2b"}; }

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
    case RandomTensor::kMlpNorm: return {0.1f, norm_offset};
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
    c->num_layers = layers;
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
