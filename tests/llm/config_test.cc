#include <gtest/gtest.h>

#include <string>

#include "llm/config.h"
#include "llm/random_model.h"

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
  }
}

TEST(LlmConfig, PresetParameterCountsMatchThePublishedModels) {
  EXPECT_NEAR(double(preset_config("llama-2-7b")->parameter_count()), 6.74e9, 0.01e9);
  EXPECT_NEAR(double(preset_config("gemma-2b")->parameter_count()), 2.51e9, 0.01e9);
  EXPECT_FALSE(preset_config("gpt2").is_ok());
}

struct BadCase {
  const char* what;
  std::string json;
  const char* expect;  // substring of the message
};

TEST(LlmConfig, RejectsBadConfigsWithAMessageNamingTheField) {
  const std::vector<BadCase> cases = {
      {"not json", "{\"vocab_size\": 12,", "not valid JSON"},
      {"not an object", "[1, 2]", "JSON object"},
      {"unknown architecture", replace(replace(kLlama, "\"llama\"", "\"gpt2\""), "LlamaForCausalLM", "GPT2LMHeadModel"),
       "unsupported architecture"},
      {"gemma2", replace(replace(kGemma, "\"gemma\"", "\"gemma2\""), "GemmaForCausalLM", "Gemma2ForCausalLM"),
       "gemma2"},
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
  for (const BadCase& c : cases) {
    auto r = parse_model_config(c.json, "dir/config.json");
    ASSERT_FALSE(r.is_ok()) << c.what;
    EXPECT_NE(r.status().message().find("dir/config.json"), std::string::npos)
        << c.what << ": " << r.status().message();
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << c.what << ": " << r.status().message();
  }
}

TEST(LlmConfig, MissingFileIsNotFound) {
  auto r = load_model_config("/nonexistent/model");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/model/config.json"), std::string::npos);
}

}  // namespace
}  // namespace tunableop::llm
