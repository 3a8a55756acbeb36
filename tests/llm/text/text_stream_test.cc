// Streaming decode against one-shot decode with the test tokenizer: at every split of every
// test string, what has been emitted is the one-shot text less only an incomplete UTF-8 tail,
// every chunk is valid UTF-8, and the end result is exactly the one-shot text.
#include "llm/text/text_stream.h"

#include <gtest/gtest.h>

#include "text_test_util.h"

namespace tunableop::llm {
namespace {

// Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (n < 0 || i + size_t(n) >= s.size()) return false;
    uint32_t cp = n == 0 ? c : n == 1 ? (c & 0x1F) : n == 2 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t min[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += size_t(n) + 1;
  }
  return true;
}

std::string strip_replacement_tail(std::string s) {
  while (ends_with_replacement_char(s)) s.resize(s.size() - 3);
  return s;
}

const std::vector<std::string>& texts() {
  static const std::vector<std::string> t = {
      "Hello Earthlings! The small robot walks.",
      "  spaces  everywhere ",
      "Le café à côté, große Züge",
      "今天天气很好，猫が好きです",
      "Rocket 🚀🌕 then 🏠.",
      "e\u0342\uFB01",
  };
  return t;
}

TEST(TextStream, ValidUtf8CheckerWorks) {
  EXPECT_TRUE(valid_utf8("abc é 中 🚀"));
  EXPECT_FALSE(valid_utf8("\xF0\x9F\x9A"));  // truncated emoji
  EXPECT_FALSE(valid_utf8("\x80"));
  EXPECT_FALSE(valid_utf8("\xC0\xAF"));  // overlong
}

TEST(TextStream, EveryPrefixEmitsTheOneShotTextLessAnIncompleteTail) {
  LOAD_TEST_TOKENIZER(tok);
  for (const auto& text : texts()) {
    auto ids = tok.encode(text);
    ASSERT_TRUE(ids.is_ok());
    TextStream stream(tok);
    std::string concatenated;
    for (size_t k = 0; k < ids->size(); ++k) {
      auto chunk = stream.put((*ids)[k]);
      ASSERT_TRUE(chunk.is_ok()) << chunk.status().to_string();
      EXPECT_TRUE(valid_utf8(*chunk)) << text << " after " << k + 1 << " tokens";
      concatenated += *chunk;
      auto one_shot = tok.decode(std::vector<int32_t>(ids->begin(), ids->begin() + ptrdiff_t(k + 1)));
      ASSERT_TRUE(one_shot.is_ok());
      EXPECT_EQ(concatenated, strip_replacement_tail(*one_shot)) << text << " after " << k + 1 << " tokens";
    }
    auto rest = stream.finish();
    ASSERT_TRUE(rest.is_ok());
    concatenated += *rest;
    EXPECT_EQ(concatenated, text);
    EXPECT_EQ(stream.emitted(), text);
  }
}

// A continuation after a prompt: split each string's ids at every point into (prompt, rest);
// the stream given the prompt as context emits exactly the text the rest adds, leading space
// included, whether it gets the whole prompt or only its last few ids.
TEST(TextStream, EverySplitIntoPromptAndContinuationMatchesOneShot) {
  LOAD_TEST_TOKENIZER(tok);
  for (const auto& text : texts()) {
    auto encoded = tok.encode(text);
    ASSERT_TRUE(encoded.is_ok());
    std::vector<int32_t> ids = {1};  // BOS, as prompts have
    ids.insert(ids.end(), encoded->begin(), encoded->end());
    auto full = tok.decode(ids);
    ASSERT_TRUE(full.is_ok());
    for (size_t split = 1; split < ids.size(); ++split) {
      const std::vector<int32_t> prompt(ids.begin(), ids.begin() + ptrdiff_t(split));
      auto prompt_text = tok.decode(prompt);
      ASSERT_TRUE(prompt_text.is_ok());
      if (ends_with_replacement_char(*prompt_text)) continue;  // a prompt never ends inside a character
      const std::string want = full->substr(prompt_text->size());
      for (const auto& context : {prompt, TextStream::context_of(prompt)}) {
        TextStream stream(tok, context);
        std::string got;
        for (size_t k = split; k < ids.size(); ++k) {
          auto chunk = stream.put(ids[k]);
          ASSERT_TRUE(chunk.is_ok());
          EXPECT_TRUE(valid_utf8(*chunk));
          got += *chunk;
        }
        auto rest = stream.finish();
        ASSERT_TRUE(rest.is_ok());
        EXPECT_EQ(got + *rest, want) << text << " split at " << split << " (context " << context.size() << ")";
      }
      auto cont = decode_continuation(tok, prompt, std::vector<int32_t>(ids.begin() + ptrdiff_t(split), ids.end()));
      ASSERT_TRUE(cont.is_ok());
      EXPECT_EQ(*cont, want);
    }
  }
}

TEST(TextStream, HoldsByteFallbackCharactersUntilComplete) {
  LOAD_TEST_TOKENIZER(tok);
  auto space = tok.encode("a");
  ASSERT_TRUE(space.is_ok());
  TextStream stream(tok, {1});
  ASSERT_EQ(*stream.put((*space)[0]), "a");
  // U+1F680 (rocket) = F0 9F 9A 80 as byte pieces <0xNN> = 3 + NN.
  const std::vector<int32_t> rocket = {3 + 0xF0, 3 + 0x9F, 3 + 0x9A, 3 + 0x80};
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(*stream.put(rocket[i]), "") << "byte " << i;
  EXPECT_EQ(*stream.put(rocket[3]), "\xF0\x9F\x9A\x80");
  // An incomplete tail at the end comes out as SentencePiece's one-shot decode gives it.
  EXPECT_EQ(*stream.put(rocket[0]), "");
  auto rest = stream.finish();
  ASSERT_TRUE(rest.is_ok());
  auto one_shot = tok.decode({1, (*space)[0], rocket[0], rocket[1], rocket[2], rocket[3], rocket[0]});
  ASSERT_TRUE(one_shot.is_ok());
  EXPECT_EQ(stream.emitted(), *one_shot);
  EXPECT_TRUE(ends_with_replacement_char(stream.emitted()));
}

TEST(TextStream, StrayBytesAreReplacedNotDropped) {
  LOAD_TEST_TOKENIZER(tok);
  const std::vector<int32_t> ids = {3 + 0x80, 3 + 'x', 3 + 0xE4, 3 + 'y'};  // lone continuation, broken lead
  TextStream stream(tok);
  std::string got;
  for (int32_t id : ids) got += *stream.put(id);
  got += *stream.finish();
  auto one_shot = tok.decode(ids);
  ASSERT_TRUE(one_shot.is_ok());
  EXPECT_EQ(got, *one_shot);
  EXPECT_TRUE(valid_utf8(got));
}

TEST(TextStream, ReportsIdsOutsideTheTokenizer) {
  LOAD_TEST_TOKENIZER(tok);
  TextStream stream(tok, {1});
  EXPECT_FALSE(stream.put(100000).is_ok());
}

}  // namespace
}  // namespace tunableop::llm
