// The tokenizers-trained fixtures (tests/fixtures/tokenizer_json: Llama-3 style, and Qwen2 style
// with NFC, legacy merges and flagged added tokens) against the ids Hugging Face recorded for a
// multilingual test set (reference.json, made by scripts/make_tokenizer_fixtures.py with
// `tokenizers` and transformers): encode, the prompt with the post-processor's special tokens,
// transformers' own call, decode; and conversations through the fixture's chat template, as
// text and as ids. Skips, naming the file, while the references are not recorded.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "llm/text/chat_template.h"
#include "llm/text/regex.h"
#include "llm/text/special_tokens.h"
#include "llm/text/tokenizer.h"
#include "text_test_util.h"

namespace tunableop::llm {
namespace {

nlohmann::json reference_or_skip(bool* skip) {
  const std::string path = testing::source_dir() + "/tests/fixtures/tokenizer_json/reference.json";
  *skip = !std::filesystem::exists(path);
  if (*skip) return {};
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

#define LOAD_REFERENCE(ref)                                                                            \
  if (!regex_available()) GTEST_SKIP() << "this build has no PCRE2 (libpcre2-dev): no tokenizer.json"; \
  bool ref##_missing = false;                                                                          \
  const nlohmann::json ref = reference_or_skip(&ref##_missing);                                        \
  if (ref##_missing)                                                                                   \
  GTEST_SKIP() << "tests/fixtures/tokenizer_json/reference.json is missing: run scripts/make_tokenizer_fixtures.py"

TEST(TokenizerJsonReference, IdsEqualHuggingFaces) {
  LOAD_REFERENCE(ref);
  for (const auto& [name, r] : ref.at("tokenizers_cases").items()) {
    const std::string dir = testing::source_dir() + "/" + r.at("dir").get<std::string>();
    auto tok = load_tokenizer(dir);
    ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
    EXPECT_EQ((*tok)->vocab_size(), r.at("vocab_size").get<int64_t>()) << name;
    auto special = load_special_tokens(dir, tok->get());
    ASSERT_TRUE(special.is_ok()) << special.status().to_string();
    int n = 0;
    for (const auto& c : r.at("cases")) {
      const std::string text = c.at("text");
      const std::string what = name + ": \"" + text.substr(0, 60) + "\"";
      auto ids = (*tok)->encode(text);
      ASSERT_TRUE(ids.is_ok()) << what << ": " << ids.status().to_string();
      EXPECT_EQ(*ids, c.at("ids").get<std::vector<int32_t>>()) << what;
      if (!text.empty() || special->add_bos) {
        auto prompt = encode_prompt(**tok, *special, text);
        ASSERT_TRUE(prompt.is_ok()) << what << ": " << prompt.status().to_string();
        EXPECT_EQ(*prompt, c.at("ids_special").get<std::vector<int32_t>>()) << what << " (tokenizers, special tokens)";
        EXPECT_EQ(*prompt, c.at("hf_ids").get<std::vector<int32_t>>()) << what << " (transformers)";
      }
      auto decoded = (*tok)->decode(c.at("ids").get<std::vector<int32_t>>());
      ASSERT_TRUE(decoded.is_ok());
      EXPECT_EQ(*decoded, c.at("decoded").get<std::string>()) << what;
      ++n;
    }
    EXPECT_GE(n, 40) << name;
  }
}

TEST(TokenizerJsonReference, ChatEqualsApplyChatTemplate) {
  LOAD_REFERENCE(ref);
  int n = 0;
  for (const auto& c : ref.at("chat")) {
    const std::string dir =
        testing::source_dir() + "/" +
        ref.at("tokenizers_cases").at(c.at("tokenizer").get<std::string>()).at("dir").get<std::string>();
    auto tok = load_tokenizer(dir);
    ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
    auto tmpl = load_chat_template(dir);
    ASSERT_TRUE(tmpl.is_ok()) << tmpl.status().to_string();
    std::vector<ChatMessage> messages;
    for (const auto& m : c.at("messages")) messages.push_back({m.at("role"), m.at("content")});
    auto text = render_chat(*tmpl, messages, true);
    ASSERT_TRUE(text.is_ok()) << text.status().to_string();
    const std::string what = c.at("tokenizer").get<std::string>() + " / " + c.at("conversation").get<std::string>();
    EXPECT_EQ(*text, c.at("text").get<std::string>()) << what;
    auto ids = (*tok)->encode(*text);  // the template wrote the BOS: nothing added
    ASSERT_TRUE(ids.is_ok());
    EXPECT_EQ(*ids, c.at("ids").get<std::vector<int32_t>>()) << what;
    ++n;
  }
  EXPECT_GE(n, 8);
}

}  // namespace
}  // namespace tunableop::llm
