// The model description read from a Hugging Face config.json (Llama and Gemma v1), and the
// few derived quantities the engine needs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tunableop/status.h"

namespace tunableop::llm {

enum class Architecture { kLlama, kGemma };
enum class Activation { kSilu, kGeluTanh, kGeluErf };

const char* architecture_name(Architecture a);  // "llama", "gemma"
const char* activation_name(Activation a);      // HF names: "silu", "gelu_pytorch_tanh", "gelu"

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // explicit in Gemma; hidden_size / num_heads when absent
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  Activation activation = Activation::kSilu;
  bool tie_word_embeddings = false;
  int64_t pad_token_id = 0;       // the id used for prompt padding (never attended to)
  std::string dtype = "float32";  // "dtype"/"torch_dtype" of the checkpoint (informational)

  // Gemma's differences from Llama, as switches the forward pass reads.
  bool norm_adds_one() const { return arch == Architecture::kGemma; }     // RMSNorm * (1 + w)
  bool scales_embedding() const { return arch == Architecture::kGemma; }  // * sqrt(hidden)

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t qkv_dim() const { return q_dim() + 2 * kv_dim(); }
  // Parameters of the model (tied lm_head counted once).
  int64_t parameter_count() const;
  // Every size positive, heads divisible by kv heads, head_dim even, ...; the message names the
  // field and `source`.
  Status validate(const std::string& source) const;
};

// Parses config.json text; `source` (a path) prefixes every error message.
StatusOr<ModelConfig> parse_model_config(std::string_view json_text, const std::string& source);
// Reads DIR/config.json.
StatusOr<ModelConfig> load_model_config(const std::string& dir);
// The config.json a Hugging Face loader accepts for this model (used to save random models).
std::string model_config_to_json(const ModelConfig& c);

}  // namespace tunableop::llm
