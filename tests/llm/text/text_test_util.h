// Shared pieces of the text tests: the committed test tokenizer (scripts/make_test_tokenizer.sh),
// a tiny random Llama whose vocabulary matches it, written as a Hugging Face directory, and a
// CPU engine over it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "llm/engine.h"
#include "llm/random_model.h"
#include "llm/text/tokenizer.h"
#include "llm/weights.h"
#include "llm_test_util.h"
#include "tunableop/context.h"

namespace tunableop::llm::testing {

inline std::string source_dir() {
  const char* src = std::getenv("TUNABLEOP_SOURCE_DIR");
  return src ? src : ".";
}
inline std::string tokenizer_fixture_dir() { return source_dir() + "/tests/fixtures/tokenizer"; }
inline std::string tokenizer_fixture() { return tokenizer_fixture_dir() + "/tokenizer.model"; }

// The test tokenizer has 512 pieces: <unk> 0, <s> 1, </s> 2, bytes 3..258, the rest text.
constexpr int64_t kTestVocab = 512;

// Skips the test in builds without SentencePiece; otherwise the loaded test tokenizer.
#define LOAD_TEST_TOKENIZER(var)                                                                            \
  if (!::tunableop::llm::tokenizer_available()) GTEST_SKIP() << "this build has no SentencePiece";          \
  auto var##_loaded = ::tunableop::llm::load_sentencepiece(::tunableop::llm::testing::tokenizer_fixture()); \
  ASSERT_TRUE(var##_loaded.is_ok()) << var##_loaded.status().to_string();                                   \
  const ::tunableop::llm::Tokenizer& var = **var##_loaded

// A Llama with GQA over the test tokenizer's vocabulary.
inline ModelConfig text_llama() {
  ModelConfig c = small_llama();
  c.vocab_size = kTestVocab;
  c.max_position_embeddings = 256;
  return c;
}

inline std::shared_ptr<const ModelWeights> text_llama_weights(uint64_t seed = 3) {
  return std::make_shared<const ModelWeights>(make_random_weights(text_llama(), seed, "text-llama"));
}

// DIR with config.json + model.safetensors, and optionally tokenizer.model and
// generation_config.json (BOS 1, EOS 2 as in Llama-2).
inline void write_text_model(const std::string& dir, bool with_tokenizer = true, uint64_t seed = 3) {
  ASSERT_TRUE(save_model(*text_llama_weights(seed), dir).is_ok());
  if (with_tokenizer) std::filesystem::copy_file(tokenizer_fixture(), dir + "/tokenizer.model");
  std::ofstream(dir + "/generation_config.json") << R"({"bos_token_id": 1, "eos_token_id": 2})";
}

struct CpuEngine {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Engine> engine;
};

inline CpuEngine text_engine(int64_t batch = 1, int64_t max_seq = 96, uint64_t seed = 3) {
  CpuEngine e;
  e.ctx = std::make_unique<Context>(Device::cpu(), Config::defaults_only());
  auto made = make_cpu_engine(text_llama_weights(seed), options(batch, max_seq, 8), tunableop_linear(*e.ctx),
                              tunableop_gemm(*e.ctx));
  EXPECT_TRUE(made.is_ok()) << made.status().to_string();
  if (made.is_ok()) e.engine = std::move(made.value());
  return e;
}

}  // namespace tunableop::llm::testing
