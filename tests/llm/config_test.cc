#include <gtest/gtest.h>

#include <string>

#include "llm/config.h"
#include "llm/random_model.h"
#include "llm_test_util.h"

namespace tunableop::llm {
namespace {

const char* kLlama = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "vocab_size": 128, "hidden_size": 64, "intermediate_size": 103,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 500.0,
  "hidden_act": "silu", "tie_word_embeddings": false, "pad_token_id": null,
  "eos_token_id": [1, 2], "torch_dtype": "bfloat16"
})";

const char* kGemma = R"({
  "architectures": ["GemmaForCausalLM"], "model_type": "gemma",
  "vocab_size": 128, "hidden_size": 64, "intermediate_size": 103, "head_dim": 32,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
  "hidden_act": "gelu", "dtype": "float32", "pad_token_id": 0
})";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(LlmConfig, ParsesLlama) {
  auto c = parse_model_config(kLlama, "llama/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->arch, Architecture::kLlama);
  EXPECT_EQ(c->head_dim, 16);  // hidden / heads when absent
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->qkv_dim(), 64 + 2 * 32);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500.0);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-5);
  EXPECT_EQ(c->activation, Activation::kSilu);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->norm_adds_one());
  EXPECT_EQ(c->pad_token_id, 0);  // null -> 0
  EXPECT_EQ(c->dtype, "bfloat16");
}

TEST(LlmConfig, ParsesGemmaWithRopeParameters) {
  auto c = parse_model_config(kGemma, "gemma/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->arch, Architecture::kGemma);
  EXPECT_EQ(c->head_dim, 32);  // explicit, != hidden / heads
  EXPECT_EQ(c->q_dim(), 128);
  EXPECT_EQ(c->num_kv_heads, 1);
  EXPECT_TRUE(c->tie_word_embeddings);  // Gemma's default
  EXPECT_TRUE(c->norm_adds_one());
  EXPECT_TRUE(c->scales_embedding());
  // hidden_act "gelu" is ignored for Gemma, as in transformers: the tanh GELU is used.
  EXPECT_EQ(c->activation, Activation::kGeluTanh);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
}

TEST(LlmConfig, RoundTripsThroughJson) {
  for (const std::string& name : preset_names()) {
    auto c = preset_config(name);
    ASSERT_TRUE(c.is_ok());
    auto back = parse_model_config(model_config_to_json(*c), name);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(back->arch, c->arch);
    EXPECT_EQ(back->head_dim, c->head_dim);
    EXPECT_EQ(back->num_kv_heads, c->num_kv_heads);
    EXPECT_EQ(back->tie_word_embeddings, c->tie_word_embeddings);
    EXPECT_EQ(back->activation, c->activation);
    EXPECT_EQ(back->parameter_count(), c->parameter_count());
    EXPECT_EQ(back->layer_types, c->layer_types) << name;
    EXPECT_EQ(back->sliding_window, c->sliding_window) << name;
    EXPECT_EQ(back->rope.type, c->rope.type) << name;
    EXPECT_DOUBLE_EQ(back->rope.factor, c->rope.factor) << name;
    EXPECT_DOUBLE_EQ(back->final_logit_softcapping, c->final_logit_softcapping) << name;
  }
}

TEST(LlmConfig, PresetParameterCountsMatchThePublishedModels) {
  EXPECT_NEAR(double(preset_config("llama-2-7b")->parameter_count()), 6.74e9, 0.01e9);
  EXPECT_NEAR(double(preset_config("gemma-2b")->parameter_count()), 2.51e9, 0.01e9);
  EXPECT_NEAR(double(preset_config("llama-3-8b")->parameter_count()), 8.03e9, 0.01e9);
  EXPECT_NEAR(double(preset_config("mistral-7b")->parameter_count()), 7.24e9, 0.01e9);
  EXPECT_NEAR(double(preset_config("qwen2.5-7b")->parameter_count()), 7.62e9, 0.01e9);
  EXPECT_NEAR(double(preset_config("gemma-2-9b")->parameter_count()), 9.24e9, 0.01e9);
  EXPECT_NEAR(double(preset_config("llama-2-13b")->parameter_count()), 13.02e9, 0.01e9);
  EXPECT_NEAR(double(preset_config("llama-2-70b")->parameter_count()), 68.98e9, 0.01e9);
  EXPECT_NEAR(double(preset_config("llama-3-70b")->parameter_count()), 70.55e9, 0.01e9);
  EXPECT_EQ(preset_config("llama-2-70b")->num_kv_heads, 8);
  EXPECT_EQ(preset_config("llama-3-70b")->rope_theta, 500000.0);
  EXPECT_FALSE(preset_config("gpt2").is_ok());
}

struct BadCase {
  const char* what;
  std::string json;
  const char* expect;  // substring of the message
};

// Each case fails with a message naming the file and its `expect`.
void expect_refused(const std::vector<BadCase>& cases) {
  for (const BadCase& c : cases) {
    auto r = parse_model_config(c.json, "dir/config.json");
    ASSERT_FALSE(r.is_ok()) << c.what;
    EXPECT_NE(r.status().message().find("dir/config.json"), std::string::npos)
        << c.what << ": " << r.status().message();
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << c.what << ": " << r.status().message();
  }
}

TEST(LlmConfig, RejectsBadConfigsWithAMessageNamingTheField) {
  const std::vector<BadCase> cases = {
      {"not json", "{\"vocab_size\": 12,", "not valid JSON"},
      {"not an object", "[1, 2]", "JSON object"},
      {"unknown architecture", replace(replace(kLlama, "\"llama\"", "\"gpt2\""), "LlamaForCausalLM", "GPT2LMHeadModel"),
       "unsupported architecture"},
      {"gemma3", replace(replace(kGemma, "\"gemma\"", "\"gemma3\""), "GemmaForCausalLM", "Gemma3ForCausalLM"),
       "gemma3"},
      {"missing field", replace(kLlama, "\"hidden_size\": 64,", ""), "hidden_size"},
      {"wrong type", replace(kLlama, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": \"2\""), "num_hidden_layers"},
      {"zero size", replace(kLlama, "\"vocab_size\": 128", "\"vocab_size\": 0"), "vocab_size"},
      {"heads not multiple", replace(kLlama, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3"),
       "num_key_value_heads"},
      {"hidden not divisible", replace(kLlama, "\"num_attention_heads\": 4", "\"num_attention_heads\": 3"), "head_dim"},
      {"odd head_dim", replace(kGemma, "\"head_dim\": 32", "\"head_dim\": 33"), "head_dim"},
      {"scaled rope", replace(kGemma, "\"rope_type\": \"default\"", "\"rope_type\": \"llama3\""), "llama3"},
      {"old rope_scaling",
       replace(kLlama, "\"hidden_act\"", "\"rope_scaling\": {\"type\": \"linear\"}, \"hidden_act\""), "linear"},
      {"bias", replace(kLlama, "\"hidden_act\"", "\"attention_bias\": true, \"hidden_act\""), "attention_bias"},
      {"activation", replace(kLlama, "\"silu\"", "\"relu\""), "relu"},
      {"pad outside vocab", replace(kGemma, "\"pad_token_id\": 0", "\"pad_token_id\": 128"), "pad_token_id"},
  };
  expect_refused(cases);
}

// The families' config.json files as their checkpoints ship them (transformers 4.x writes) and as
// transformers 5.x writes them (rope_parameters, layer_types).
const char* kLlama31 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000, "eos_token_id": 128001,
  "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_parameters": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                      "original_max_position_embeddings": 8192, "rope_theta": 500000.0, "rope_type": "llama3"},
  "tie_word_embeddings": false, "dtype": "bfloat16", "transformers_version": "5.0.0", "vocab_size": 128256
})";

const char* kQwen25 = R"({
  "architectures": ["Qwen2ForCausalLM"], "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu",
  "hidden_size": 3584, "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
  "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "use_mrope": false, "use_sliding_window": false, "vocab_size": 152064
})";

const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 12288, "max_position_embeddings": 40960, "max_window_layers": 36,
  "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 151936
})";

const char* kMistral = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false, "vocab_size": 32000
})";

const char* kGemma2 = R"({
  "architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attn_logit_softcapping": 50.0,
  "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1, "final_logit_softcapping": 30.0,
  "head_dim": 256, "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584,
  "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 16,
  "num_hidden_layers": 42, "num_key_value_heads": 8, "pad_token_id": 0, "query_pre_attn_scalar": 256,
  "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "vocab_size": 256000
})";

TEST(LlmConfig, ParsesLlama31InBothRopeForms) {
  std::string old_form = replace(replace(kLlama31, "\"rope_parameters\"", "\"rope_theta\": 500000.0, \"rope_scaling\""),
                                 "\"rope_theta\": 500000.0, \"rope_type\"", "\"rope_type\"");
  for (const std::string& text : {std::string(kLlama31), old_form}) {
    auto c = parse_model_config(text, "llama31/config.json");
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    EXPECT_EQ(c->arch, Architecture::kLlama);
    EXPECT_EQ(c->rope.type, RopeType::kLlama3);
    EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
    EXPECT_DOUBLE_EQ(c->rope.factor, 8);
    EXPECT_DOUBLE_EQ(c->rope.low_freq_factor, 1);
    EXPECT_DOUBLE_EQ(c->rope.high_freq_factor, 4);
    EXPECT_EQ(c->rope.original_max_position_embeddings, 8192);
    EXPECT_NEAR(double(c->parameter_count()), 8.03e9, 0.01e9);
    EXPECT_EQ(c->layer_window(0), 0);
  }
}

TEST(LlmConfig, ParsesQwen25WithBiasesAndNoWindowUnlessUsed) {
  auto c = parse_model_config(kQwen25, "qwen/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->arch, Architecture::kQwen2);
  EXPECT_TRUE(c->qkv_bias);  // Qwen2 always has them
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_TRUE(c->layer_types.empty());
  EXPECT_NEAR(double(c->parameter_count()), 7.62e9, 0.01e9);
  // use_sliding_window: layers from max_window_layers on slide (transformers' Qwen2Config).
  auto w = parse_model_config(replace(replace(kQwen25, "\"use_sliding_window\": false", "\"use_sliding_window\": true"),
                                      "\"max_window_layers\": 28", "\"max_window_layers\": 20"),
                              "qwen/config.json");
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_EQ(w->layer_window(19), 0);
  EXPECT_EQ(w->layer_window(20), 131072);
  // YaRN as Qwen's long-context recipe adds it.
  auto y = parse_model_config(
      replace(kQwen25, "\"rope_theta\"",
              "\"rope_scaling\": {\"factor\": 4.0, \"original_max_position_embeddings\": 32768, \"type\": \"yarn\"}, "
              "\"rope_theta\""),
      "qwen/config.json");
  ASSERT_TRUE(y.is_ok()) << y.status().to_string();
  EXPECT_EQ(y->rope.type, RopeType::kYarn);
  EXPECT_EQ(y->rope.original_max_position_embeddings, 32768);
}

TEST(LlmConfig, ParsesQwen3WithHeadNorms) {
  auto c = parse_model_config(kQwen3, "qwen3/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->arch, Architecture::kQwen3);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);  // an integer in the file
  EXPECT_NEAR(double(c->parameter_count()), 8.19e9, 0.01e9);
}

TEST(LlmConfig, ParsesMistralWithAWindowOnEveryLayer) {
  auto c = parse_model_config(kMistral, "mistral/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->arch, Architecture::kMistral);
  for (int64_t l = 0; l < c->num_layers; ++l) EXPECT_EQ(c->layer_window(l), 4096);
  EXPECT_NEAR(double(c->parameter_count()), 7.24e9, 0.01e9);
  auto none = parse_model_config(replace(kMistral, "\"sliding_window\": 4096", "\"sliding_window\": null"), "m");
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(none->layer_window(0), 0);
}

TEST(LlmConfig, ParsesGemma2Features) {
  auto c = parse_model_config(kGemma2, "gemma2/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->arch, Architecture::kGemma2);
  EXPECT_TRUE(c->post_norms);
  EXPECT_TRUE(c->norm_adds_one());
  EXPECT_TRUE(c->scales_embedding());
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->activation, Activation::kGeluTanh);
  EXPECT_DOUBLE_EQ(c->attn_logit_softcapping, 50);
  EXPECT_DOUBLE_EQ(c->final_logit_softcapping, 30);
  EXPECT_EQ(c->attention_scale(), 0);   // 256 = head_dim: the default scale
  EXPECT_EQ(c->layer_window(0), 4096);  // sliding first, then global, alternating
  EXPECT_EQ(c->layer_window(1), 0);
  EXPECT_EQ(c->layer_window(40), 4096);
  EXPECT_NEAR(double(c->parameter_count()), 9.24e9, 0.01e9);
  // Gemma-2-27B's scalar differs from head_dim; transformers 5 writes layer_types; null softcaps.
  std::string v5 = replace(kGemma2, "\"query_pre_attn_scalar\": 256", "\"query_pre_attn_scalar\": 144");
  v5 = replace(v5, "\"num_hidden_layers\": 42", "\"num_hidden_layers\": 3");
  v5 = replace(v5, "\"attn_logit_softcapping\": 50.0",
               "\"attn_logit_softcapping\": null, \"layer_types\": [\"full_attention\", \"sliding_attention\", "
               "\"full_attention\"]");
  auto c5 = parse_model_config(v5, "gemma2/config.json");
  ASSERT_TRUE(c5.is_ok()) << c5.status().to_string();
  EXPECT_EQ(c5->attention_scale(), double(1.0f / 12));  // 144^-1/2, in fp32
  EXPECT_EQ(c5->attn_logit_softcapping, 0);
  EXPECT_EQ(c5->layer_window(0), 0);
  EXPECT_EQ(c5->layer_window(1), 4096);
  // A missing softcap takes Gemma2Config's default.
  auto d = parse_model_config(replace(kGemma2, "\"final_logit_softcapping\": 30.0,", ""), "g");
  ASSERT_TRUE(d.is_ok());
  EXPECT_DOUBLE_EQ(d->final_logit_softcapping, 30);
}

TEST(LlmConfig, RejectsBadFamilyConfigsNamingTheField) {
  const std::vector<BadCase> cases = {
      {"unknown rope type", replace(kLlama31, "\"llama3\"", "\"longrope\""), "longrope"},
      {"llama3 without low_freq_factor", replace(kLlama31, "\"low_freq_factor\": 1.0,", ""), "low_freq_factor"},
      {"llama3 equal factors", replace(kLlama31, "\"low_freq_factor\": 1.0", "\"low_freq_factor\": 4.0"),
       "low_freq_factor"},
      {"yarn without factor",
       replace(kQwen25, "\"rope_theta\"", "\"rope_scaling\": {\"type\": \"yarn\"}, \"rope_theta\""), "factor"},
      {"negative factor", replace(kLlama31, "\"factor\": 8.0", "\"factor\": -8.0"), "factor"},
      {"partial rotary", replace(kLlama31, "\"factor\": 8.0", "\"factor\": 8.0, \"partial_rotary_factor\": 0.5"),
       "partial_rotary_factor"},
      {"rope per layer type",
       replace(kGemma2, "\"rope_theta\": 10000.0",
               "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"default\"}, \"sliding_attention\": "
               "{\"rope_type\": \"default\"}}"),
       "per layer type"},
      {"layer_types length",
       replace(kGemma2, "\"sliding_window\": 4096",
               "\"sliding_window\": 4096, \"layer_types\": "
               "[\"full_attention\"]"),
       "layer_types"},
      {"layer_types value",
       replace(kMistral, "\"sliding_window\": 4096",
               "\"sliding_window\": 4096, \"layer_types\": [\"full_attention\", "
               "\"chunked_attention\"]"),
       "layer_types[1]"},
      {"sliding layer without window",
       replace(replace(kMistral, "\"sliding_window\": 4096", "\"sliding_window\": null"), "\"num_hidden_layers\": 32",
               "\"num_hidden_layers\": 1, \"layer_types\": [\"sliding_attention\"]"),
       "sliding_window"},
      {"zero window", replace(kMistral, "\"sliding_window\": 4096", "\"sliding_window\": 0"), "sliding_window"},
      {"negative softcap", replace(kGemma2, "\"attn_logit_softcapping\": 50.0", "\"attn_logit_softcapping\": -1"),
       "attn_logit_softcapping"},
      {"string scalar", replace(kGemma2, "\"query_pre_attn_scalar\": 256", "\"query_pre_attn_scalar\": \"256\""),
       "query_pre_attn_scalar"},
      {"qwen3 o bias", replace(kQwen3, "\"attention_bias\": false", "\"attention_bias\": true"), "attention_bias"},
      {"gemma2 bias", replace(kGemma2, "\"attention_bias\": false", "\"attention_bias\": true"), "attention_bias"},
      {"layers beyond bound", replace(kGemma2, "\"num_hidden_layers\": 42", "\"num_hidden_layers\": 1099511627776"),
       "num_hidden_layers"},
      {"bidirectional", replace(kGemma2, "\"attention_bias\": false", "\"use_bidirectional_attention\": true"),
       "use_bidirectional_attention"},
      {"use_sliding_window type", replace(kQwen25, "\"use_sliding_window\": false", "\"use_sliding_window\": 0"),
       "use_sliding_window"},
  };
  expect_refused(cases);
}

TEST(LlmConfig, FamilyPresetsKeepTheirLayerPatternWhenShrunk) {
  auto c = preset_config("gemma-2-9b");
  ASSERT_TRUE(c.is_ok());
  set_layer_count(*c, 3);
  EXPECT_EQ(c->num_layers, 3);
  EXPECT_EQ(c->layer_window(0), 4096);
  EXPECT_EQ(c->layer_window(1), 0);
  EXPECT_EQ(c->layer_window(2), 4096);
  EXPECT_TRUE(c->validate("gemma-2-9b").is_ok());
  auto spec = parse_model_spec("builtin:mistral-7b");
  ASSERT_TRUE(spec.is_ok());
  auto m = spec_config(*spec, 2);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->layer_types.size(), 2u);
}

// The decode step's results key tells models of one shape apart by their features.
TEST(LlmConfig, FeatureTagNamesWhatChangesTheStep) {
  EXPECT_EQ(feature_tag(*preset_config("llama-2-7b")), "");
  EXPECT_EQ(feature_tag(*preset_config("gemma-2b")), "");
  EXPECT_EQ(feature_tag(*preset_config("llama-3-8b")), "_ropellama3");
  EXPECT_EQ(feature_tag(*preset_config("qwen2.5-7b")), "_bias");
  EXPECT_EQ(feature_tag(*preset_config("mistral-7b")), "_w4096");
  EXPECT_EQ(feature_tag(*preset_config("gemma-2-9b")), "_post_cap50.0_30.0_w4096");
  EXPECT_EQ(feature_tag(*preset_config("gemma-2-9b-nocap")), "_post_w4096");
  EXPECT_EQ(feature_tag(testing::small_qwen3()), "_qknorm");
}

TEST(LlmConfig, DeeplyNestedTypedFieldIsAnErrorNotACrash) {
  // 100,000 levels in a typed field: dump() recursed once per level building the message and
  // overflowed the stack (SIGSEGV, issue 33). The message describes the value by its size.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const char* field : {"\"num_hidden_layers\": 2", "\"hidden_act\": \"silu\""}) {
    const std::string key = std::string(field).substr(0, std::string(field).find(':'));
    auto r = parse_model_config(replace(kLlama, field, key + ": " + deep), "dir/config.json");
    ASSERT_FALSE(r.is_ok()) << key;
    EXPECT_NE(r.status().message().find("(got an array of 1 elements)"), std::string::npos) << r.status().message();
  }
  // An unused key nests as deep as it likes.
  auto ok = parse_model_config(replace(kLlama, "\"hidden_act\"", "\"unused\": " + deep + ", \"hidden_act\""), "c");
  EXPECT_TRUE(ok.is_ok()) << ok.status().to_string();
}

TEST(LlmConfig, MissingFileIsNotFound) {
  auto r = load_model_config("/nonexistent/model");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/model/config.json"), std::string::npos);
}

}  // namespace
}  // namespace tunableop::llm
