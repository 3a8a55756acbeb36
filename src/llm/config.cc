#include "llm/config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "llm/config_reader.h"
#include "tunableop/checked_size.h"
#include "tunableop/safe_file.h"

namespace tunableop::llm {

using config_detail::json;
using config_detail::Reader;

using json = nlohmann::json;

namespace {

struct Family {
  Architecture arch;
  const char* model_type;
  const char* class_name;
};
constexpr Family kFamilies[] = {
    {Architecture::kLlama, "llama", "LlamaForCausalLM"},       {Architecture::kGemma, "gemma", "GemmaForCausalLM"},
    {Architecture::kMistral, "mistral", "MistralForCausalLM"}, {Architecture::kQwen2, "qwen2", "Qwen2ForCausalLM"},
    {Architecture::kQwen3, "qwen3", "Qwen3ForCausalLM"},       {Architecture::kGemma2, "gemma2", "Gemma2ForCausalLM"},
};

const Family& family(Architecture a) {
  for (const Family& f : kFamilies)
    if (f.arch == a) return f;
  return kFamilies[0];
}

}  // namespace

const char* architecture_name(Architecture a) { return family(a).model_type; }
const char* architecture_class(Architecture a) { return family(a).class_name; }

const char* rope_type_name(RopeType t) {
  switch (t) {
    case RopeType::kDefault: return "default";
    case RopeType::kLinear: return "linear";
    case RopeType::kDynamic: return "dynamic";
    case RopeType::kYarn: return "yarn";
    case RopeType::kLlama3: return "llama3";
  }
  return "?";
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kSilu: return "silu";
    case Activation::kGeluTanh: return "gelu_pytorch_tanh";
    case Activation::kGeluErf: return "gelu";
  }
  return "?";
}

namespace {

// Every size the model implies, checked: config.json is user input, and a wrapped product would
// size a buffer smaller than the loops that fill it.
CheckedInt checked_parameters(const ModelConfig& c) {
  const CheckedInt H = c.hidden_size, Q = CheckedInt(c.num_heads) * c.head_dim,
                   KV = CheckedInt(c.num_kv_heads) * c.head_dim;
  CheckedInt per_layer = H * (Q + KV * 2) + Q * H + H * c.intermediate_size * 3 + H * 2;
  if (c.qkv_bias) per_layer += Q + KV * 2;
  if (c.qk_norm) per_layer += CheckedInt(c.head_dim) * 2;
  if (c.post_norms) per_layer += H * 2;
  CheckedInt n = H * c.vocab_size + per_layer * c.num_layers + H;
  if (!c.tie_word_embeddings) n += H * c.vocab_size;
  return n;
}

// The family features' consistency (layer types against the layer count and the window, ...).
Status validate_family_features(const ModelConfig& c, const std::string& source) {
  auto bad = [&](const std::string& what) { return Status::invalid_argument(source + ": " + what); };
  if (!c.layer_types.empty() && int64_t(c.layer_types.size()) != c.num_layers) {
    return bad("layer_types has " + std::to_string(c.layer_types.size()) + " entries for num_hidden_layers (" +
               std::to_string(c.num_layers) + ")");
  }
  if (c.sliding_window < 0) return bad("sliding_window must be > 0");
  for (size_t i = 0; i < c.layer_types.size(); ++i) {
    if (c.layer_types[i] == LayerType::kSliding && c.sliding_window == 0) {
      return bad("layer_types[" + std::to_string(i) + "] is \"sliding_attention\" but there is no sliding_window");
    }
  }
  const std::pair<const char*, double> non_negative[] = {{"attn_logit_softcapping", c.attn_logit_softcapping},
                                                         {"final_logit_softcapping", c.final_logit_softcapping},
                                                         {"query_pre_attn_scalar", c.query_pre_attn_scalar}};
  for (auto& [name, v] : non_negative) {
    if (!(v >= 0) || !std::isfinite(v)) return bad(std::string(name) + " must be a positive number");
  }
  if (c.rope.type != RopeType::kDefault) {
    const std::string rt = std::string("rope_parameters (rope_type \"") + rope_type_name(c.rope.type) + "\"): ";
    if (!(c.rope.factor > 0) || !std::isfinite(c.rope.factor)) return bad(rt + "factor must be a positive number");
    if (c.rope.original_max_position_embeddings < 0) return bad(rt + "original_max_position_embeddings must be > 0");
    if (c.rope.type == RopeType::kLlama3 && (!(c.rope.low_freq_factor > 0) || !(c.rope.high_freq_factor > 0) ||
                                             c.rope.low_freq_factor == c.rope.high_freq_factor))
      return bad(rt + "low_freq_factor and high_freq_factor must be different positive numbers");
  }
  return Status::ok();
}

}  // namespace

int64_t ModelConfig::parameter_count() const { return checked_parameters(*this).value(); }

int64_t ModelConfig::layer_window(int64_t layer) const {
  if (layer < 0 || size_t(layer) >= layer_types.size()) return 0;
  return layer_types[size_t(layer)] == LayerType::kSliding ? sliding_window : 0;
}

double ModelConfig::attention_scale() const {
  // transformers: query_pre_attn_scalar ** -0.5, applied in fp32 (the float is what the kernels
  // use, and what the op's problem key writes exactly); equal to the default when it is
  // head_dim (the key then stays the default one).
  if (query_pre_attn_scalar <= 0 || query_pre_attn_scalar == double(head_dim)) return 0;
  return double(float(std::pow(query_pre_attn_scalar, -0.5)));
}

Status ModelConfig::validate(const std::string& source) const {
  auto bad = [&](const std::string& what) { return Status::invalid_argument(source + ": " + what); };
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_layers},
      {"num_attention_heads", num_heads},
      {"num_key_value_heads", num_kv_heads},
      {"head_dim", head_dim},
      {"max_position_embeddings", max_position_embeddings},
  };
  for (auto& [name, v] : positive) {
    if (v <= 0) return bad(std::string(name) + " must be > 0 (got " + std::to_string(v) + ")");
  }
  // Every derived size (tensor element counts, their sum, fp32 bytes) must fit 64 bits; what
  // fits this machine's memory is checked where buffers are allocated.
  if (CheckedInt n = checked_parameters(*this); !n.ok() || !checked_bytes(n.value(), sizeof(float))) {
    return bad("the sizes overflow: vocab_size (" + std::to_string(vocab_size) + "), hidden_size (" +
               std::to_string(hidden_size) + "), intermediate_size (" + std::to_string(intermediate_size) +
               "), num_hidden_layers (" + std::to_string(num_layers) +
               ") and the heads give more parameters than "
               "a 64-bit byte count can hold");
  }
  if (num_heads % num_kv_heads != 0) {
    return bad("num_attention_heads (" + std::to_string(num_heads) + ") must be a multiple of num_key_value_heads (" +
               std::to_string(num_kv_heads) + ")");
  }
  // Rotate-half RoPE pairs element i with i + head_dim/2.
  if (head_dim % 2 != 0) return bad("head_dim (" + std::to_string(head_dim) + ") must be even for RoPE");
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps)) return bad("rms_norm_eps must be a positive number");
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) return bad("rope_theta must be a positive number");
  if (pad_token_id < 0 || pad_token_id >= vocab_size) {
    return bad("pad_token_id (" + std::to_string(pad_token_id) + ") is outside the vocabulary");
  }
  return validate_family_features(*this, source);
}

namespace {

std::optional<Architecture> architecture_from(const std::string& model_type, const std::string& class_name) {
  for (const Family& f : kFamilies)
    if (model_type == f.model_type) return f.arch;
  for (const Family& f : kFamilies)
    if (class_name == f.class_name) return f.arch;
  return std::nullopt;
}

std::optional<Activation> activation_from(const std::string& s) {
  if (s == "silu" || s == "swish") return Activation::kSilu;
  if (s == "gelu_pytorch_tanh" || s == "gelu_tanh" || s == "gelu_new" || s == "gelu_fast") return Activation::kGeluTanh;
  if (s == "gelu") return Activation::kGeluErf;
  return std::nullopt;
}

json rope_parameters_json(const ModelConfig& c) {
  const RopeScaling& s = c.rope;
  json rp = {{"rope_theta", c.rope_theta}, {"rope_type", rope_type_name(s.type)}};
  if (s.type == RopeType::kDefault) return rp;
  rp["factor"] = s.factor;
  if (s.original_max_position_embeddings > 0)
    rp["original_max_position_embeddings"] = s.original_max_position_embeddings;
  if (s.type == RopeType::kLlama3)
    rp["low_freq_factor"] = s.low_freq_factor, rp["high_freq_factor"] = s.high_freq_factor;
  if (s.type == RopeType::kYarn) {
    if (s.attention_factor > 0) rp["attention_factor"] = s.attention_factor;
    if (s.mscale > 0) rp["mscale"] = s.mscale;
    if (s.mscale_all_dim > 0) rp["mscale_all_dim"] = s.mscale_all_dim;
    rp["beta_fast"] = s.beta_fast, rp["beta_slow"] = s.beta_slow, rp["truncate"] = s.truncate;
  }
  return rp;
}

// The family's fields, as its transformers config class reads them back.
void add_family_features_json(const ModelConfig& c, json& j) {
  if (!c.layer_types.empty()) {
    json lt = json::array();
    for (LayerType t : c.layer_types) lt.push_back(t == LayerType::kSliding ? "sliding_attention" : "full_attention");
    j["layer_types"] = lt;
  }
  const bool qwen = c.arch == Architecture::kQwen2 || c.arch == Architecture::kQwen3;
  if (c.sliding_window > 0) j["sliding_window"] = c.sliding_window;
  if (c.arch == Architecture::kMistral && c.sliding_window == 0) j["sliding_window"] = nullptr;
  if (qwen) {
    j["use_sliding_window"] = c.sliding_window > 0;
    if (c.sliding_window == 0) j["sliding_window"] = nullptr;
  }
  if (c.arch == Architecture::kGemma2) {
    auto cap = [](double v) { return v > 0 ? json(v) : json(nullptr); };
    j["attn_logit_softcapping"] = cap(c.attn_logit_softcapping);
    j["final_logit_softcapping"] = cap(c.final_logit_softcapping);
    j["query_pre_attn_scalar"] = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : double(c.head_dim);
    if (c.sliding_window == 0) j["sliding_window"] = nullptr;
  }
}

}  // namespace

StatusOr<ModelConfig> parse_model_config(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Status::parse_error(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return Status::parse_error(source + ": the top level must be a JSON object");

  Reader r{j, source, Status::ok()};
  ModelConfig c;
  std::string model_type = r.opt_str(j, "model_type").value_or("");
  std::string class_name;
  if (r.present("architectures")) {
    const json& a = j.at("architectures");
    if (a.is_array() && !a.empty() && a[0].is_string()) class_name = a[0].get<std::string>();
  }
  if (!r.ok()) return r.error;
  auto arch = architecture_from(model_type, class_name);
  if (!arch) {
    std::string known;
    for (const Family& f : kFamilies)
      known += std::string(known.empty() ? "" : ", ") + f.model_type + " (" + f.class_name + ")";
    return Status::unsupported(source + ": unsupported architecture (model_type \"" + model_type +
                               "\", architectures[0] \"" + class_name + "\"); supported: " + known);
  }
  c.arch = *arch;
  const bool gemma = c.norm_adds_one();  // Gemma and Gemma-2: tied, hidden_activation, (1 + w) norms

  c.vocab_size = r.req_int("vocab_size");
  c.hidden_size = r.req_int("hidden_size");
  c.intermediate_size = r.req_int("intermediate_size");
  c.num_layers = r.req_int("num_hidden_layers");
  c.num_heads = r.req_int("num_attention_heads");
  c.num_kv_heads = r.opt_int("num_key_value_heads").value_or(c.num_heads);
  std::optional<int64_t> head_dim = r.opt_int("head_dim");
  c.max_position_embeddings = r.opt_int("max_position_embeddings").value_or(c.max_position_embeddings);
  if (auto eps = r.opt_num(j, "rms_norm_eps", "")) c.rms_norm_eps = *eps;
  config_detail::read_rope(r, c);
  c.tie_word_embeddings = r.opt_bool("tie_word_embeddings").value_or(gemma);
  c.pad_token_id = r.opt_int("pad_token_id").value_or(0);
  c.dtype = r.opt_str(j, "dtype").value_or(r.opt_str(j, "torch_dtype").value_or("float32"));
  config_detail::read_family_features(r, c);
  // The config classes' head_dim defaults (Gemma-2: 256, Qwen3: 128); the others derive it.
  if (!head_dim && c.arch == Architecture::kGemma2) head_dim = 256;
  if (!head_dim && c.arch == Architecture::kQwen3) head_dim = 128;

  // Gemma reads `hidden_activation` and, like transformers, falls back to the tanh GELU when it
  // is absent (its older configs say "gelu" in hidden_act but were trained with the tanh form).
  std::optional<std::string> act = r.opt_str(j, "hidden_activation");
  if (!act && !gemma) act = r.opt_str(j, "hidden_act");
  if (!r.ok()) return r.error;
  if (!act) act = gemma ? "gelu_pytorch_tanh" : "silu";
  auto activation = activation_from(*act);
  if (!activation) return Status::unsupported(source + ": unsupported activation \"" + *act + "\"");
  c.activation = *activation;

  if (head_dim) {
    c.head_dim = *head_dim;
  } else if (c.num_heads > 0) {
    if (c.hidden_size % c.num_heads != 0) {
      return Status::invalid_argument(source + ": hidden_size (" + std::to_string(c.hidden_size) +
                                      ") is not a multiple of num_attention_heads (" + std::to_string(c.num_heads) +
                                      ") and no head_dim is given");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  TUNABLEOP_RETURN_IF_ERROR(c.validate(source));
  return c;
}

StatusOr<ModelConfig> load_model_config(const std::string& dir) {
  std::string path = dir + "/config.json";
  auto text = read_regular_file(path);  // never blocks on a FIFO; refuses directories, devices
  if (!text.is_ok()) {
    if (text.status().code() == StatusCode::kNotFound)
      return Status::not_found(path + ": cannot open (is this a Hugging Face model directory?)");
    return text.status();
  }
  return parse_model_config(*text, path);
}

std::string model_config_to_json(const ModelConfig& c) {
  const bool gemma = c.norm_adds_one();
  json j;
  j["architectures"] = {architecture_class(c.arch)};
  j["model_type"] = architecture_name(c.arch);
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_parameters"] = rope_parameters_json(c);
  j[gemma ? "hidden_activation" : "hidden_act"] = activation_name(c.activation);
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["pad_token_id"] = c.pad_token_id;
  j["attention_bias"] = c.arch == Architecture::kQwen2;  // Qwen2 ignores it (always biased)
  j["dtype"] = c.dtype;
  add_family_features_json(c, j);
  return j.dump(2) + "\n";
}

std::string feature_tag(const ModelConfig& c) {
  std::string t;
  auto num = [](double v) {  // as JSON writes the number: 50.0, 0.5
    json j = v;
    return j.dump();
  };
  if (c.qkv_bias) t += "_bias";
  if (c.qk_norm) t += "_qknorm";
  if (c.post_norms) t += "_post";
  if (c.attn_logit_softcapping > 0 || c.final_logit_softcapping > 0)
    t += "_cap" + num(c.attn_logit_softcapping) + "_" + num(c.final_logit_softcapping);
  if (c.sliding_window > 0 && !c.layer_types.empty()) t += "_w" + std::to_string(c.sliding_window);
  if (c.attention_scale() > 0) t += "_qs" + num(c.query_pre_attn_scalar);
  if (c.rope.type != RopeType::kDefault) t += std::string("_rope") + rope_type_name(c.rope.type);
  return t;
}

void set_layer_count(ModelConfig& c, int64_t layers) {
  // Beyond 2^16 layers the types stay as they are: validate() then refuses the count mismatch
  // (rather than this allocating for an absurd --layers).
  if (!c.layer_types.empty() && layers >= 0 && layers <= (int64_t(1) << 16)) {
    const std::vector<LayerType> pattern = c.layer_types;
    c.layer_types.resize(size_t(layers));
    for (size_t i = 0; i < c.layer_types.size(); ++i) c.layer_types[i] = pattern[i % pattern.size()];
  }
  c.num_layers = layers;
}

}  // namespace tunableop::llm
