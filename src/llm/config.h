// The model description read from a Hugging Face config.json (Llama 2/3, Mistral, Qwen2/2.5,
// Qwen3, Gemma and Gemma-2), and the few derived quantities the engine needs. A family is a
// set of switches the forward pass reads (biases, q/k norms, post-norms, softcapping, sliding
// windows per layer, the RoPE scaling): nothing downstream asks which family it is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tunableop/status.h"

namespace tunableop::llm {

enum class Architecture { kLlama, kGemma, kMistral, kQwen2, kQwen3, kGemma2 };
enum class Activation { kSilu, kGeluTanh, kGeluErf };

// transformers' model_type ("llama", "gemma", "mistral", "qwen2", "qwen3", "gemma2") and the
// class of architectures[0] ("LlamaForCausalLM", ...).
const char* architecture_name(Architecture a);
const char* architecture_class(Architecture a);
const char* activation_name(Activation a);  // HF names: "silu", "gelu_pytorch_tanh", "gelu"

// RoPE's inverse frequencies, as transformers' rope_parameters / rope_scaling describe them
// (modeling_rope_utils): "default", "linear", "dynamic" (NTK; the same as default up to
// max_position_embeddings, which the engine does not exceed), "yarn" and "llama3".
enum class RopeType { kDefault, kLinear, kDynamic, kYarn, kLlama3 };
const char* rope_type_name(RopeType t);

struct RopeScaling {
  RopeType type = RopeType::kDefault;
  double factor = 1.0;                               // linear, dynamic, yarn, llama3
  int64_t original_max_position_embeddings = 0;      // yarn, llama3 (0: max_position_embeddings)
  double low_freq_factor = 0, high_freq_factor = 0;  // llama3
  double attention_factor = 0;                       // yarn: cos and sin scale (0: from factor/mscale)
  double beta_fast = 32, beta_slow = 1;              // yarn
  double mscale = 0, mscale_all_dim = 0;             // yarn (DeepSeek's form of attention_factor)
  bool truncate = true;                              // yarn: integer correction range
};

// A layer's attention (transformers' layer_types).
enum class LayerType { kFull, kSliding };

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // explicit in Gemma and Qwen3; hidden_size / num_heads when absent
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope;
  Activation activation = Activation::kSilu;
  bool tie_word_embeddings = false;
  int64_t pad_token_id = 0;       // the id used for prompt padding (never attended to)
  std::string dtype = "float32";  // "dtype"/"torch_dtype" of the checkpoint (informational)

  // Family features (all off for Llama 2 and Gemma v1).
  bool qkv_bias = false;               // Qwen2: biases on the q, k and v projections
  bool qk_norm = false;                // Qwen3: RMSNorm over each q and k head (head_dim wide) before RoPE
  bool post_norms = false;             // Gemma-2: RMSNorm of the attention and MLP outputs before each residual add
  int64_t sliding_window = 0;          // keys a sliding layer's query sees, itself included (0: none)
  std::vector<LayerType> layer_types;  // num_layers entries, or empty: every layer full
  double attn_logit_softcapping = 0;   // Gemma-2: scores -> cap * tanh(scores / cap) (0: none)
  double final_logit_softcapping = 0;  // Gemma-2: the same on the logits
  double query_pre_attn_scalar = 0;    // Gemma-2: attention scale query_pre_attn_scalar^-1/2 (0: head_dim's)

  // Gemma's differences from Llama, as switches the forward pass reads.
  bool norm_adds_one() const { return arch == Architecture::kGemma || arch == Architecture::kGemma2; }
  bool scales_embedding() const { return norm_adds_one(); }  // * sqrt(hidden)
  // The sliding window of `layer` (0: full attention).
  int64_t layer_window(int64_t layer) const;
  // The attention op's scale (0: its default, 1 / sqrt(head_dim)).
  double attention_scale() const;

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
// The features that change a model's decode step beyond its shape, as a results-file tag
// ("" for Llama 2 and Gemma; e.g. "_bias", "_qknorm", "_post_cap50_30_w4096"): decode choices
// tuned for one model are not served to another of the same shape.
std::string feature_tag(const ModelConfig& c);
// `layers` layers with the family's pattern of layer types kept (a built-in model shrunk with
// --layers): the types repeat with the first ones' period.
void set_layer_count(ModelConfig& c, int64_t layers);

}  // namespace tunableop::llm
