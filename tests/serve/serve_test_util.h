// Shared pieces of the server's tests: the committed test tokenizer (512 pieces: <unk> 0, <s> 1,
// </s> 2, bytes 3..258, text after) and a served model over it or without it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "llm/text/tokenizer.h"
#include "serve/openai/served_model.h"

namespace tunableop::serve::testing {

inline std::string tokenizer_fixture() {
  const char* src = std::getenv("TUNABLEOP_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/fixtures/tokenizer/tokenizer.model";
}

// The test tokenizer, or null in builds without SentencePiece (the caller skips).
inline std::shared_ptr<const llm::Tokenizer> test_tokenizer() {
  if (!llm::tokenizer_available()) return nullptr;
  auto t = llm::load_sentencepiece(tokenizer_fixture());
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  if (!t.is_ok()) return nullptr;
  return std::shared_ptr<const llm::Tokenizer>(std::move(t.value()));
}

#define SERVE_TEST_TOKENIZER(var)                           \
  auto var = ::tunableop::serve::testing::test_tokenizer(); \
  if (!var) GTEST_SKIP() << "this build has no SentencePiece (or the fixture is missing)"

// A model of `vocab` ids and `context` positions; `tokenizer` null: ids only.
inline openai::ServedModel served_model(std::shared_ptr<const llm::Tokenizer> tokenizer = nullptr, int64_t vocab = 512,
                                        int64_t context = 256) {
  openai::ServedModel m;
  m.name = "test-model";
  m.created = 1700000000;
  m.vocab_size = vocab;
  m.max_context = context;
  m.tokenizer = std::move(tokenizer);
  m.special.bos = 1;
  m.special.add_bos = true;
  m.special.eos = {2};
  return m;
}

}  // namespace tunableop::serve::testing
