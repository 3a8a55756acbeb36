#include "llm/config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "tunableop/checked_size.h"
#include "tunableop/safe_file.h"

namespace tunableop::llm {

using json = nlohmann::json;

const char* architecture_name(Architecture a) { return a == Architecture::kGemma ? "gemma" : "llama"; }

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
  const CheckedInt per_layer = H * (Q + KV * 2) + Q * H + H * c.intermediate_size * 3 + H * 2;
  CheckedInt n = H * c.vocab_size + per_layer * c.num_layers + H;
  if (!c.tie_word_embeddings) n += H * c.vocab_size;
  return n;
}

}  // namespace

int64_t ModelConfig::parameter_count() const { return checked_parameters(*this).value(); }

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
  return Status::ok();
}

namespace {

// Small typed accessors: every wrong type or missing key becomes a message naming the field.
struct Reader {
  const json& j;
  const std::string& source;
  Status error;

  bool ok() const { return error.is_ok(); }
  void fail(const std::string& m) {
    if (error.is_ok()) error = Status::parse_error(source + ": " + m);
  }
  bool present(const char* key) const { return j.contains(key) && !j.at(key).is_null(); }

  std::optional<int64_t> opt_int(const char* key) {
    if (!present(key)) return std::nullopt;
    const json& v = j.at(key);
    if (!v.is_number_integer()) {
      fail(std::string("field \"") + key + "\" must be an integer (got " + v.dump() + ")");
      return std::nullopt;
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) {
      fail(std::string("field \"") + key + "\" is too large (got " + v.dump() + ", at most 2^63 - 1)");
      return std::nullopt;
    }
    return v.get<int64_t>();
  }
  int64_t req_int(const char* key) {
    if (!present(key)) {
      fail(std::string("missing required field \"") + key + "\"");
      return 0;
    }
    return opt_int(key).value_or(0);
  }
  std::optional<double> opt_num(const json& obj, const char* key, const char* where) {
    if (!obj.contains(key) || obj.at(key).is_null()) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_number()) {
      fail(std::string("field \"") + where + key + "\" must be a number (got " + v.dump() + ")");
      return std::nullopt;
    }
    return v.get<double>();
  }
  std::optional<std::string> opt_str(const json& obj, const char* key, const char* where = "") {
    if (!obj.contains(key) || obj.at(key).is_null()) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_string()) {
      fail(std::string("field \"") + where + key + "\" must be a string (got " + v.dump() + ")");
      return std::nullopt;
    }
    return v.get<std::string>();
  }
  std::optional<bool> opt_bool(const char* key) {
    if (!present(key)) return std::nullopt;
    const json& v = j.at(key);
    if (!v.is_boolean()) {
      fail(std::string("field \"") + key + "\" must be true or false (got " + v.dump() + ")");
      return std::nullopt;
    }
    return v.get<bool>();
  }
};

std::optional<Architecture> architecture_from(const std::string& model_type, const std::string& class_name) {
  if (model_type == "llama" || class_name == "LlamaForCausalLM") return Architecture::kLlama;
  if (model_type == "gemma" || class_name == "GemmaForCausalLM") return Architecture::kGemma;
  return std::nullopt;
}

std::optional<Activation> activation_from(const std::string& s) {
  if (s == "silu" || s == "swish") return Activation::kSilu;
  if (s == "gelu_pytorch_tanh" || s == "gelu_tanh" || s == "gelu_new" || s == "gelu_fast") return Activation::kGeluTanh;
  if (s == "gelu") return Activation::kGeluErf;
  return std::nullopt;
}

// RoPE: `rope_parameters: {rope_theta, rope_type}` (transformers 5) or top-level `rope_theta`
// with an optional `rope_scaling` (transformers 4). Only the plain ("default") rotation is
// implemented; a scaled one would silently give wrong results, so it is refused.
void read_rope(Reader& r, ModelConfig& c) {
  const json& j = r.j;
  if (auto t = r.opt_num(j, "rope_theta", "")) c.rope_theta = *t;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!r.present(key)) continue;
    const json& rp = j.at(key);
    if (!rp.is_object()) {
      r.fail(std::string("field \"") + key + "\" must be an object (got " + rp.dump() + ")");
      return;
    }
    std::string where = std::string(key) + ".";
    if (auto t = r.opt_num(rp, "rope_theta", where.c_str())) c.rope_theta = *t;
    std::optional<std::string> type = r.opt_str(rp, "rope_type", where.c_str());
    if (!type) type = r.opt_str(rp, "type", where.c_str());
    if (type && *type != "default") {
      r.fail("unsupported " + where + "rope_type \"" + *type + "\" (only \"default\" RoPE is implemented)");
      return;
    }
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
    return Status::unsupported(source + ": unsupported architecture (model_type \"" + model_type +
                               "\", architectures[0] \"" + class_name +
                               "\"); supported: llama (LlamaForCausalLM), gemma (GemmaForCausalLM)");
  }
  c.arch = *arch;
  const bool gemma = c.arch == Architecture::kGemma;

  c.vocab_size = r.req_int("vocab_size");
  c.hidden_size = r.req_int("hidden_size");
  c.intermediate_size = r.req_int("intermediate_size");
  c.num_layers = r.req_int("num_hidden_layers");
  c.num_heads = r.req_int("num_attention_heads");
  c.num_kv_heads = r.opt_int("num_key_value_heads").value_or(c.num_heads);
  std::optional<int64_t> head_dim = r.opt_int("head_dim");
  c.max_position_embeddings = r.opt_int("max_position_embeddings").value_or(c.max_position_embeddings);
  if (auto eps = r.opt_num(j, "rms_norm_eps", "")) c.rms_norm_eps = *eps;
  read_rope(r, c);
  c.tie_word_embeddings = r.opt_bool("tie_word_embeddings").value_or(gemma);
  c.pad_token_id = r.opt_int("pad_token_id").value_or(0);
  c.dtype = r.opt_str(j, "dtype").value_or(r.opt_str(j, "torch_dtype").value_or("float32"));
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (r.opt_bool(key).value_or(false)) {
      r.fail(std::string("\"") + key + "\": true is not supported (the engine has no bias terms)");
    }
  }

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
  const bool gemma = c.arch == Architecture::kGemma;
  json j;
  j["architectures"] = {gemma ? "GemmaForCausalLM" : "LlamaForCausalLM"};
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
  j["rope_parameters"] = {{"rope_theta", c.rope_theta}, {"rope_type", "default"}};
  j[gemma ? "hidden_activation" : "hidden_act"] = activation_name(c.activation);
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["pad_token_id"] = c.pad_token_id;
  j["attention_bias"] = false;
  j["dtype"] = c.dtype;
  return j.dump(2) + "\n";
}

}  // namespace tunableop::llm
