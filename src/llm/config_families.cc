// config.json's family-specific fields: RoPE scaling, sliding windows and layer types, biases,
// q/k norms, Gemma-2's post-norms, softcapping and attention scale, with the defaults that
// transformers' config classes (5.x) give fields a config.json leaves out.
#include <cmath>
#include <string>

#include "llm/config.h"
#include "llm/config_reader.h"

namespace tunableop::llm::config_detail {

namespace {

std::optional<RopeType> rope_type_from(const std::string& s) {
  if (s == "default") return RopeType::kDefault;
  if (s == "linear") return RopeType::kLinear;
  if (s == "dynamic") return RopeType::kDynamic;
  if (s == "yarn") return RopeType::kYarn;
  if (s == "llama3") return RopeType::kLlama3;
  return std::nullopt;
}

// A number that must be present and positive (rope_parameters.factor, ...).
double required_positive(Reader& r, const json& obj, const char* key, const std::string& where, const char* type) {
  auto v = r.opt_num(obj, key, where.c_str());
  if (!r.ok()) return 0;
  if (!v) {
    r.fail("missing field \"" + where + key + "\" (rope_type \"" + type + "\" needs it)");
    return 0;
  }
  if (!(*v > 0) || !std::isfinite(*v)) {
    r.fail("field \"" + where + key + "\" must be a positive number (got " + std::to_string(*v) + ")");
    return 0;
  }
  return *v;
}

// The scaling fields of one rope_parameters / rope_scaling object.
void read_scaling(Reader& r, const json& rp, const std::string& where, ModelConfig& c) {
  if (auto t = r.opt_num(rp, "rope_theta", where.c_str())) c.rope_theta = *t;
  std::optional<std::string> type = r.opt_str(rp, "rope_type", where.c_str());
  if (!type) type = r.opt_str(rp, "type", where.c_str());
  if (!r.ok() || !type) return;
  auto t = rope_type_from(*type);
  if (!t) {
    r.fail("unsupported " + where + "rope_type \"" + *type +
           "\" (implemented: default, linear, dynamic, yarn, llama3; RoPE computed another way would give "
           "wrong results)");
    return;
  }
  RopeScaling& s = c.rope;
  s.type = *t;
  if (auto prf = r.opt_num(rp, "partial_rotary_factor", where.c_str()); prf && *prf != 1.0) {
    r.fail("field \"" + where + "partial_rotary_factor\" (" + std::to_string(*prf) +
           ") is not supported: RoPE rotates whole heads here");
    return;
  }
  if (s.type == RopeType::kDefault) return;
  const char* name = type->c_str();
  s.factor = required_positive(r, rp, "factor", where, name);
  if (auto o = r.opt_int(rp, "original_max_position_embeddings", where.c_str())) {
    if (*o <= 0) r.fail("field \"" + where + "original_max_position_embeddings\" must be > 0");
    s.original_max_position_embeddings = *o;
  }
  if (s.type == RopeType::kLlama3) {
    s.low_freq_factor = required_positive(r, rp, "low_freq_factor", where, name);
    s.high_freq_factor = required_positive(r, rp, "high_freq_factor", where, name);
    if (r.ok() && s.low_freq_factor == s.high_freq_factor) {
      r.fail("fields \"" + where + "low_freq_factor\" and \"high_freq_factor\" must differ (both " +
             std::to_string(s.low_freq_factor) + ")");
    }
  }
  if (s.type == RopeType::kYarn) {
    auto non_negative = [&](const char* key, double* dst) {
      if (auto v = r.opt_num(rp, key, where.c_str())) {
        if (!(*v >= 0) || !std::isfinite(*v)) r.fail("field \"" + where + key + "\" must be a number >= 0");
        *dst = *v;
      }
    };
    non_negative("attention_factor", &s.attention_factor);
    non_negative("mscale", &s.mscale);
    non_negative("mscale_all_dim", &s.mscale_all_dim);
    // transformers: `rope_parameters.get("beta_fast") or 32`: 0 (or null) means the default.
    if (auto v = r.opt_num(rp, "beta_fast", where.c_str()); v && *v != 0) s.beta_fast = *v;
    if (auto v = r.opt_num(rp, "beta_slow", where.c_str()); v && *v != 0) s.beta_slow = *v;
    if (auto v = r.opt_bool(rp, "truncate", where.c_str())) s.truncate = *v;
    if (r.ok() && !(s.beta_fast > 0 && s.beta_slow > 0 && std::isfinite(s.beta_fast) && std::isfinite(s.beta_slow))) {
      r.fail("fields \"" + where + "beta_fast\" and \"beta_slow\" must be positive numbers");
    }
  }
}

std::optional<LayerType> layer_type_from(const std::string& s) {
  if (s == "full_attention") return LayerType::kFull;
  if (s == "sliding_attention") return LayerType::kSliding;
  return std::nullopt;
}

// `layer_types`, when config.json has it: one of "full_attention" / "sliding_attention" per layer.
bool read_layer_types(Reader& r, ModelConfig& c) {
  if (!r.present("layer_types")) return false;
  const json& lt = r.j.at("layer_types");
  if (!lt.is_array()) {
    r.fail("field \"layer_types\" must be a list of strings (got " + json_brief(lt) + ")");
    return false;
  }
  c.layer_types.clear();
  for (size_t i = 0; i < lt.size(); ++i) {
    const std::string at = "layer_types[" + std::to_string(i) + "]";
    if (!lt[i].is_string()) {
      r.fail("field \"" + at + "\" must be a string (got " + json_brief(lt[i]) + ")");
      return false;
    }
    auto t = layer_type_from(lt[i].get<std::string>());
    if (!t) {
      r.fail("field \"" + at + "\" is \"" + lt[i].get<std::string>() +
             "\" (supported: \"full_attention\", \"sliding_attention\")");
      return false;
    }
    c.layer_types.push_back(*t);
  }
  return true;
}

// Per-layer types made from a pattern (no layer_types in the file): one entry per layer, so the
// layer count is bounded first (a config claiming 2^40 layers must fail, not allocate).
constexpr int64_t kMaxLayers = int64_t(1) << 16;
bool layer_count_ok(Reader& r, const ModelConfig& c) {
  if (c.num_layers >= 0 && c.num_layers <= kMaxLayers) return true;
  r.fail("field \"num_hidden_layers\" (" + std::to_string(c.num_layers) + ") is beyond " + std::to_string(kMaxLayers) +
         " layers");
  return false;
}

int64_t positive_window(Reader& r, const char* key) {
  auto w = r.opt_int(key);
  if (w && *w <= 0) r.fail(std::string("field \"") + key + "\" must be > 0 (got " + std::to_string(*w) + ")");
  return w.value_or(0);
}

// A softcap: the class's default when the key is missing, none when it says null.
double softcap(Reader& r, const char* key, double missing) {
  if (r.null(key)) return 0;
  auto v = r.opt_num(r.j, key, "");
  if (v && (!(*v > 0) || !std::isfinite(*v))) r.fail(std::string("field \"") + key + "\" must be > 0 or null");
  return v.value_or(missing);
}

// Qwen2/Qwen3 (transformers 5): a window only when use_sliding_window; then layers from
// max_window_layers on slide, unless layer_types says otherwise.
void read_qwen_windows(Reader& r, ModelConfig& c) {
  const bool use = r.opt_bool("use_sliding_window").value_or(false);
  const int64_t window = positive_window(r, "sliding_window");
  c.sliding_window = use ? window : 0;
  if (read_layer_types(r, c) || !r.ok()) return;
  if (c.sliding_window == 0 || !layer_count_ok(r, c)) return;
  const int64_t first = r.opt_int("max_window_layers").value_or(28);
  c.layer_types.assign(size_t(c.num_layers), LayerType::kFull);
  for (int64_t i = std::max<int64_t>(first, 0); i < c.num_layers; ++i) c.layer_types[size_t(i)] = LayerType::kSliding;
}

void refuse_bias(Reader& r, const char* why) {
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (r.opt_bool(key).value_or(false)) r.fail(std::string("\"") + key + "\": true is not supported (" + why + ")");
  }
}

}  // namespace

void read_rope(Reader& r, ModelConfig& c) {
  const json& j = r.j;
  if (auto t = r.opt_num(j, "rope_theta", "")) c.rope_theta = *t;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!r.present(key)) continue;
    const json& rp = j.at(key);
    if (!rp.is_object()) {
      r.fail(std::string("field \"") + key + "\" must be an object (got " + json_brief(rp) + ")");
      return;
    }
    // transformers 5 nests one object per layer type when they differ (Gemma-3): not these families.
    if (rp.contains("full_attention") || rp.contains("sliding_attention")) {
      r.fail(std::string("field \"") + key + "\" gives RoPE per layer type, which is not supported");
      return;
    }
    read_scaling(r, rp, std::string(key) + ".", c);
    if (!r.ok()) return;
  }
  // transformers takes a top-level original_max_position_embeddings (Phi-3's form) first.
  if (c.rope.type == RopeType::kYarn || c.rope.type == RopeType::kLlama3) {
    if (auto o = r.opt_int("original_max_position_embeddings")) c.rope.original_max_position_embeddings = *o;
  }
}

void read_family_features(Reader& r, ModelConfig& c) {
  switch (c.arch) {
    case Architecture::kLlama:
    case Architecture::kGemma: refuse_bias(r, "the engine has no bias terms in these families"); return;
    case Architecture::kMistral:
      refuse_bias(r, "Mistral has none");
      c.sliding_window = positive_window(r, "sliding_window");
      // Mistral slides on every layer when it has a window (transformers' MistralModel).
      if (!read_layer_types(r, c) && c.sliding_window > 0 && layer_count_ok(r, c))
        c.layer_types.assign(size_t(c.num_layers), LayerType::kSliding);
      return;
    case Architecture::kQwen2:
      c.qkv_bias = true;  // Qwen2Attention: q, k, v with bias, o without, whatever the config says
      read_qwen_windows(r, c);
      return;
    case Architecture::kQwen3:
      c.qk_norm = true;
      if (r.opt_bool("attention_bias").value_or(false))
        r.fail("\"attention_bias\": true is not supported for qwen3 (its o_proj would have a bias)");
      read_qwen_windows(r, c);
      return;
    case Architecture::kGemma2:
      refuse_bias(r, "Gemma-2 has none");
      if (r.opt_bool("use_bidirectional_attention").value_or(false))
        r.fail("\"use_bidirectional_attention\": true is not supported (attention here is causal)");
      c.post_norms = true;
      c.attn_logit_softcapping = softcap(r, "attn_logit_softcapping", 50.0);
      c.final_logit_softcapping = softcap(r, "final_logit_softcapping", 30.0);
      c.query_pre_attn_scalar = 256;
      if (auto q = r.opt_num(r.j, "query_pre_attn_scalar", "")) {
        if (!(*q > 0) || !std::isfinite(*q)) r.fail("field \"query_pre_attn_scalar\" must be > 0");
        c.query_pre_attn_scalar = *q;
      }
      c.sliding_window = r.null("sliding_window") ? 0 : 4096;
      if (r.present("sliding_window")) c.sliding_window = positive_window(r, "sliding_window");
      // Gemma2Config: layer 0 slides, layer 1 is global, and so on.
      if (!read_layer_types(r, c) && layer_count_ok(r, c)) {
        c.layer_types.clear();
        for (int64_t i = 0; i < c.num_layers; ++i)
          c.layer_types.push_back(i % 2 == 0 ? LayerType::kSliding : LayerType::kFull);
      }
      return;
  }
}

}  // namespace tunableop::llm::config_detail
